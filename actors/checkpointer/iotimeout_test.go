package checkpointer

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/store/memstore"
)

// hangingPositions is a PositionSource that answers only when its context ends, as a capture
// against an unreachable server does.
type hangingPositions struct{}

func (hangingPositions) Current(ctx context.Context) (bson.Raw, bson.Timestamp, error) {
	<-ctx.Done()
	return nil, bson.Timestamp{}, ctx.Err()
}

// hangOn makes the memstore calls of op wait until their context ends.
func hangOn(op memstore.Op) func(context.Context, memstore.Op) error {
	return func(ctx context.Context, got memstore.Op) error {
		if got != op {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}
}

// TestIOTimeoutBoundsTheStartCascade: a checkpoint load, a position capture or a start-position
// save that never answers (an unreachable server) fails the start request transiently after
// IOTimeout, instead of holding the checkpointer's I/O goroutine until its context ends.
func TestIOTimeoutBoundsTheStartCascade(t *testing.T) {
	const ioTimeout = 50 * time.Millisecond
	for _, tc := range []struct {
		name      string
		edit      func(*harness, *Config)
		wantStage string
	}{
		{"load", func(h *harness, _ *Config) { h.ms.SetFault(hangOn(memstore.OpLoad)) }, "load checkpoint"},
		{"capture", func(_ *harness, c *Config) { c.Positions = hangingPositions{} }, "capture the current position"},
		{"persist", func(h *harness, _ *Config) { h.ms.SetFault(hangOn(memstore.OpSave)) }, "persist the start position"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(h *harness, c *Config) {
				c.IOTimeout = ioTimeout
				tc.edit(h, c)
			})
			start := time.Now()
			sf := h.resolve(1)
			took := time.Since(start)
			if sf.GetKind() != wire.StartKind_START_KIND_FAIL || sf.GetTerminal() {
				t.Fatalf("StartFrom %v, want a transient FAIL", sf)
			}
			if r := sf.GetReason(); !strings.HasPrefix(r, tc.wantStage) || !strings.Contains(r, "deadline exceeded") {
				t.Fatalf("reason %q, want %q ... deadline exceeded", r, tc.wantStage)
			}
			if took > 5*time.Second {
				t.Fatalf("the FAIL took %v with IOTimeout %v", took, ioTimeout)
			}
		})
	}
}
