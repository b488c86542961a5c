package logx

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestWithKeepsFieldsOfAnEnabledLogger(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := With(zap.New(core), zap.String("stream", "orders"))
	l.Info("hello")
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("got %d entries, want 1", len(entries))
	}
	if got := entries[0].ContextMap()["stream"]; got != "orders" {
		t.Fatalf("stream field = %v, want orders", got)
	}
}

func TestWithOnlyFatalEnabledStillAddsFields(t *testing.T) {
	core, _ := observer.New(zapcore.FatalLevel)
	base := zap.New(core)
	if l := With(base, zap.String("stream", "orders")); l == base {
		t.Fatal("a logger that can still log Fatal lines lost its fields")
	}
}

func TestWithNopLoggerAllocatesNoClone(t *testing.T) {
	nop := zap.NewNop()
	if l := With(nop, zap.String("stream", "orders")); l != nop {
		t.Fatal("the no-op logger was cloned")
	}
	// The field slice is the caller's; the clone zap.Logger.With makes is what is saved.
	f := []zap.Field{zap.String("stream", "orders")}
	if n := testing.AllocsPerRun(100, func() { _ = With(nop, f...) }); n != 0 {
		t.Fatalf("With on the no-op logger allocates %.0f times, want 0", n)
	}
}
