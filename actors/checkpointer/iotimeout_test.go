package checkpointer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
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
			if sf.GetKind() != messages.StartKind_START_KIND_FAIL || sf.GetTerminal() {
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

// deadlineStore records the deadline of each Save's context.
type deadlineStore struct {
	Store
	deadline time.Time
}

func (d *deadlineStore) Save(ctx context.Context, _ store.Checkpoint) error {
	d.deadline, _ = ctx.Deadline()
	return nil
}

// TestAdmitBeforeIOTimeout: a store call waits for Admit before its IOTimeout starts, so a call
// that queued for admission still gets the whole IOTimeout; release follows the call; a failed
// admission fails the call without reaching the store.
func TestAdmitBeforeIOTimeout(t *testing.T) {
	const ioTimeout = time.Minute
	ds := &deadlineStore{}
	var admitted time.Time
	released := 0
	c := Config{Store: ds, IOTimeout: ioTimeout, Admit: func(ctx context.Context) (func(), error) {
		// A queue of other calls ahead of this one.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		admitted = time.Now()
		return func() { released++ }, nil
	}}.boundIO()
	if err := c.Store.Save(context.Background(), store.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	if ds.deadline.Before(admitted.Add(ioTimeout)) {
		t.Fatalf("the call's deadline %v is before admission (%v) + IOTimeout: the wait for admission counted against it", ds.deadline, admitted)
	}
	if released != 1 {
		t.Fatalf("released %d times, want 1", released)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ds.deadline = time.Time{}
	if _, _, err := c.Store.Load(ctx, store.Scope{}); !errors.Is(err, context.Canceled) || released != 1 {
		t.Fatalf("Load with its context ended while waiting for admission: %v (released %d), want context.Canceled and no release", err, released)
	}
}
