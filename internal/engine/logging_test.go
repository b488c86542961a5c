package engine

import (
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
