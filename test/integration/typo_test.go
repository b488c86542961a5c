package integration_test

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/watchtree/watchtree"
)

// typoPipeline has a stage name no server knows.
var typoPipeline = bson.A{bson.D{{Key: "$mach", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}

// A pipeline the server refuses fails Spawn in every mode and role: AllInstances, a SingleLeader
// stream that leads at once, and one that would stand by behind a healthy leader (before, it
// waited in standby and crashed only when it took over, after the good instances were gone).
// The log says it once, as the terminal failure, with no line about a restart first.
func TestPipelineTypoFailsSpawnInEveryRole(t *testing.T) {
	for _, role := range []string{"all instances", "leader", "standby"} {
		t.Run(role, func(t *testing.T) {
			e := newEnv(t)
			if role == "standby" {
				healthy := e.startRuntime(func(cfg *watchtree.Config) { cfg.Lease = testLease; cfg.InstanceID = "healthy" })
				h := healthy.spawn(t, watchtree.Stream[Order]{Name: "billing", Collection: "orders", Mode: watchtree.SingleLeader,
					OnInsert: func(context.Context, *watchtree.Event[Order]) error { return nil }})
				healthy.waitRunning(t, h)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			r := e.startRuntime(func(cfg *watchtree.Config) {
				cfg.Lease = testLease
				cfg.InstanceID = "deployed-with-typo"
				cfg.Logger = zap.New(core)
			})
			spec := watchtree.Stream[Order]{Name: "billing", Collection: "orders", Pipeline: typoPipeline,
				OnInsert: func(context.Context, *watchtree.Event[Order]) error { return nil }}
			if role != "all instances" {
				spec.Mode = watchtree.SingleLeader
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_, err := r.rt.Spawn(ctx, withCursor(spec))
			if err == nil {
				t.Fatal("Spawn with a pipeline typo returned nil")
			}
			if !strings.Contains(err.Error(), "$mach") {
				t.Errorf("Spawn: %v, want the server's refusal naming the stage", err)
			}
			if _, herr := r.rt.Handle("billing"); herr == nil {
				t.Error("the name stays registered after the failed Spawn")
			}
			for _, l := range logs.All() {
				why, _ := l.ContextMap()["why"].(string)
				if l.Level >= zapcore.WarnLevel && strings.Contains(l.Message+" "+why, "restart") {
					t.Errorf("log %s %q %v: a typo is terminal, nothing restarts", l.Level, l.Message, l.ContextMap())
				}
			}
		})
	}
}
