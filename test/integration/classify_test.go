package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// TestServerConfigurationErrorIsTerminal: a Pipeline the server refuses is a configuration error
// that no restart can fix. The stream crashes at once (no restart) and Spawn fails with the
// server's own error (code and message), and nothing calls it a panic. It holds whether the
// error comes from capturing the first position (the checkpointer's aggregate) or from opening
// the cursor (the stream actor's aggregate, here with At, which captures nothing).
func TestServerConfigurationErrorIsTerminal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pipeline bson.A
		start    watchtree.StartPosition
		code     int32
		message  string
	}{
		{"unknown stage at capture", bson.A{bson.D{{Key: "$matchh", Value: bson.D{}}}}, watchtree.Resume,
			40324, "Unrecognized pipeline stage name: '$matchh'"},
		{"unknown stage at open", bson.A{bson.D{{Key: "$matchh", Value: bson.D{}}}}, watchtree.At(time.Now()),
			40324, "Unrecognized pipeline stage name: '$matchh'"},
		{"unknown query operator", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$eqq", Value: 1}}}}}}},
			watchtree.Resume, 2, "unknown operator: $eqq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.startRuntime(nil)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_, err := r.rt.Spawn(ctx, withCursor(watchtree.Stream[Order]{Name: "bad-pipeline", Collection: "orders", Pipeline: tc.pipeline,
				StartPosition: tc.start, Restart: fastRestart, OnInsert: newHandled().handler()}))
			if err == nil {
				t.Fatal("Spawn succeeded with a pipeline the server refuses")
			}
			t.Logf("Spawn: %v", err)
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Spawn's error %q, want the server's message %q", err, tc.message)
			}
			if strings.Contains(err.Error(), "panic") {
				t.Errorf("Spawn's error %q calls a server error a panic", err)
			}
			var spawnErr mongo.ServerError
			if !errors.As(err, &spawnErr) || !spawnErr.HasErrorCode(int(tc.code)) {
				t.Errorf("Spawn's error %v, want a server error with code %d", err, tc.code)
			}
			if _, err := r.rt.Handle("bad-pipeline"); !errors.Is(err, watchtree.ErrUnknownStream) {
				t.Errorf("the name stays taken after a failed Spawn: %v", err)
			}
			if rs := restartsOf(r, "bad-pipeline"); len(rs) != 0 {
				t.Errorf("restarts %v; want none (terminal at once)", rs)
			}
			stopped := r.obs.wait(t, "terminal Stopped", func(ev observe.Event) bool {
				s, ok := ev.(observe.Stopped)
				return ok && s.Terminal
			}).(observe.Stopped)
			var se mongo.ServerError
			if !errors.As(stopped.Cause, &se) || !se.HasErrorCode(int(tc.code)) {
				t.Errorf("Stopped.Cause %v (%T), want a server error with code %d", stopped.Cause, stopped.Cause, tc.code)
			}
			if n := len(r.obs.find(func(ev observe.Event) bool {
				s, ok := ev.(observe.Stopped)
				return ok && !s.Terminal
			})); n != 0 {
				t.Errorf("%d non-terminal Stopped events: a configuration error must not enter backoff", n)
			}
		})
	}
}

// TestTransientStartFailureBacksOff: the aggregate that captures the first position fails with
// MaxTimeMSExpired (50), a timeout the server may report any time and that the driver does not
// retry by itself (its own retryable reads, such as HostUnreachable, are retried within the
// call's deadline and never reach the stream). That is transient: the stream goes to backoff,
// the RestartPolicy restarts it, and it runs once the fault is gone.
func TestTransientStartFailureBacksOff(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	e.failPoint(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"aggregate"}},
		{Key: "errorCode", Value: 50}, {Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: r.app}})
	h := r.spawn(t, watchtree.Stream[Order]{Name: "flaky-start", Collection: "orders", Restart: fastRestart,
		OnInsert: newHandled().handler()})
	r.waitRunning(t, h)
	// The Observer is fed asynchronously: wait for the backoff's report.
	cause := r.obs.wait(t, "a non-terminal Stopped (the failed start went to backoff)", func(ev observe.Event) bool {
		s, ok := ev.(observe.Stopped)
		return ok && s.Reason == observe.Crashed && !s.Terminal
	}).(observe.Stopped).Cause
	var se mongo.ServerError
	if !errors.As(cause, &se) || !se.HasErrorCode(50) {
		t.Errorf("backoff cause %v (%T), want the server's MaxTimeMSExpired (50)", cause, cause)
	}
	if cause != nil && strings.Contains(cause.Error(), "panic") {
		t.Errorf("backoff cause %q calls a server error a panic", cause)
	}
	if n := len(r.obs.find(func(ev observe.Event) bool {
		s, ok := ev.(observe.Stopped)
		return ok && s.Terminal
	})); n != 0 {
		t.Errorf("%d terminal Stopped events for a transient fault", n)
	}
}
