package engine

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestSlogBridge: protoactor's slog output reaches the runtime's zap logger, named
// "protoactor", with the actor system's id.
func TestSlogBridge(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	sys := NewActorSystem(zap.New(core))
	defer sys.Shutdown()
	sys.Logger().Warn("from protoactor", "k", "v")
	entries := logs.FilterMessage("from protoactor").All()
	if len(entries) != 1 {
		t.Fatalf("%d entries: %v", len(entries), logs.All())
	}
	ent := entries[0]
	if ent.LoggerName != "protoactor" {
		t.Fatalf("logger name %q", ent.LoggerName)
	}
	fields := ent.ContextMap()
	if fields["k"] != "v" || fields["actor_system"] != sys.ID {
		t.Fatalf("fields %v", fields)
	}
}

// TestStartLogNamesTheInstanceOnce: the runtime's logger already carries "instance", so the
// startup line must not add a second one (a JSON encoder writes both keys).
func TestStartLogNamesTheInstanceOnce(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zap.InfoLevel)
	cfg := testConfig(e, nil)
	cfg.Logger = zap.New(core)
	rt := New(cfg)
	if err := rt.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Stop(context.Background()) }()
	lines := logs.FilterMessage("watchtree runtime started").All()
	if len(lines) != 1 {
		t.Fatalf("%d start lines: %v", len(lines), logs.All())
	}
	n := 0
	for _, f := range lines[0].Context {
		if f.Key == "instance" {
			n++
		}
	}
	if n != 1 || lines[0].ContextMap()["instance"] != cfg.InstanceID || lines[0].ContextMap()["instance_name"] != cfg.InstanceName {
		t.Fatalf("start line has %d instance keys: %v", n, lines[0].Context)
	}
}
