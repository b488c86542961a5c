package checkpointer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

func withSnapshot(mode policy.SnapshotMode) func(*harness, *Config) {
	return func(h *harness, c *Config) { c.Snapshot, c.Snapshots = policy.Snapshot{Mode: mode}, h.ms }
}

// TestSnapshotFirstStart: with no checkpoint, the handoff position is captured, the snapshot
// record written, then the checkpoint (in that order), and StartFrom names the snapshot until
// the stream reports it done.
func TestSnapshotFirstStart(t *testing.T) {
	var order []memstore.Op
	var recorded atomic.Bool
	h := newHarness(t, withSnapshot(policy.SnapshotInitial))
	h.ms.SetFault(func(_ context.Context, op memstore.Op) error {
		if op == memstore.OpSave || op == memstore.OpSaveSnapshot {
			if !recorded.Load() {
				order = append(order, op)
			}
		}
		return nil
	})
	sf := h.resolve(1)
	recorded.Store(true)
	if sf.GetSnapshotId() == "" || tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != store.SourceSnapshot {
		t.Fatalf("StartFrom %v: want the handoff position and a snapshot id", sf)
	}
	if len(order) != 2 || order[0] != memstore.OpSaveSnapshot || order[1] != memstore.OpSave {
		t.Fatalf("writes %v: want the snapshot record before the checkpoint", order)
	}
	sn, ok, _ := h.ms.LoadSnapshot(context.Background(), store.Scope{Stream: "orders"})
	if !ok || sn.ID != sf.GetSnapshotId() || sn.State != store.SnapshotRunning || tokData(sn.HandoffToken) != "0now-1" ||
		sn.Reason != store.SnapshotReasonInitial {
		t.Fatalf("snapshot record %+v", sn)
	}
	if cp, _ := h.stored(); cp.Source != store.SourceSnapshot || tokData(cp.Token) != "0now-1" {
		t.Fatalf("checkpoint %+v", cp)
	}
	// A restart of the stream actor before the snapshot ends: the same snapshot again.
	if again := h.resolve(2); again.GetSnapshotId() != sf.GetSnapshotId() {
		t.Fatalf("second StartFrom %v: want snapshot %s again", again, sf.GetSnapshotId())
	}
	// The handoff position moves forward while the snapshot is pending.
	h.request(&wire.AdvanceHandoff{SnapshotId: sf.GetSnapshotId(), Token: tok("later")})
	h.request(&wire.ResolveStart{Incarnation: 2, SnapshotDone: sf.GetSnapshotId()})
	done := next[*wire.StartFrom](h)
	if done.GetSnapshotId() != "" || tokData(done.GetToken()) != "later" {
		t.Fatalf("StartFrom after the snapshot %v: want no snapshot and the moved position", done)
	}
	// Once done, an AdvanceHandoff is ignored.
	h.request(&wire.AdvanceHandoff{SnapshotId: sf.GetSnapshotId(), Token: tok("too-late")})
	h.sync()
	if sf := h.resolve(3); tokData(sf.GetToken()) != "later" {
		t.Fatalf("a late AdvanceHandoff moved the position: %v", sf)
	}
}

// TestSnapshotResumesRunningRecord: a fresh checkpointer (a new process) that finds a running
// snapshot record names it again, from the stored checkpoint; a finished record is never
// named, and a checkpoint without a record starts no snapshot.
func TestSnapshotResumesRunningRecord(t *testing.T) {
	ctx := context.Background()
	t.Run("running record and checkpoint", func(t *testing.T) {
		h := newHarness(t, withSnapshot(policy.SnapshotInitial))
		_ = h.ms.SaveSnapshot(ctx, store.Snapshot{Stream: "orders", ID: "s1", State: store.SnapshotRunning, HandoffToken: tok("h")})
		_ = h.ms.Save(ctx, store.Checkpoint{Stream: "orders", Token: tok("h2"), Source: store.SourceSnapshot})
		if sf := h.resolve(1); sf.GetSnapshotId() != "s1" || tokData(sf.GetToken()) != "h2" {
			t.Fatalf("StartFrom %v: want snapshot s1 from the checkpoint", sf)
		}
	})
	t.Run("running record without checkpoint", func(t *testing.T) {
		h := newHarness(t, withSnapshot(policy.SnapshotInitial))
		_ = h.ms.SaveSnapshot(ctx, store.Snapshot{Stream: "orders", ID: "s1", State: store.SnapshotRunning, HandoffToken: tok("h")})
		if sf := h.resolve(1); sf.GetSnapshotId() != "s1" || tokData(sf.GetToken()) != "h" {
			t.Fatalf("StartFrom %v: want snapshot s1 from the record's handoff (no checkpoint yet)", sf)
		}
		if cp, ok := h.stored(); !ok || tokData(cp.Token) != "h" {
			t.Fatalf("the handoff position was not persisted: %+v", cp)
		}
	})
	t.Run("finished record", func(t *testing.T) {
		h := newHarness(t, withSnapshot(policy.SnapshotInitial))
		_ = h.ms.SaveSnapshot(ctx, store.Snapshot{Stream: "orders", ID: "s0", State: store.SnapshotDone})
		_ = h.ms.Save(ctx, store.Checkpoint{Stream: "orders", Token: tok("cp"), Source: store.SourceEvent})
		if sf := h.resolve(1); sf.GetSnapshotId() != "" || tokData(sf.GetToken()) != "cp" {
			t.Fatalf("StartFrom %v: a finished snapshot must not run again", sf)
		}
	})
}

// TestSnapshotRebuildAfterHistoryLost: under SnapshotWhenNeeded, lost history writes the gap
// record (policy rebuildFromSnapshot), a new snapshot record, then the checkpoint, and names the
// snapshot.
func TestSnapshotRebuildAfterHistoryLost(t *testing.T) {
	h := newHarness(t, withSnapshot(policy.SnapshotWhenNeeded))
	ctx := context.Background()
	_ = h.ms.Save(ctx, store.Checkpoint{Stream: "orders", Token: tok("old"), Source: store.SourceEvent})
	if sf := h.resolve(1); sf.GetSnapshotId() != "" {
		t.Fatalf("StartFrom %v: a stream with a checkpoint starts no snapshot", sf)
	}
	h.pos.set(tok("0now-9"), h.pos.ts, nil)
	sf := h.historyLost(1, 286, "history lost")
	if sf.GetSnapshotId() == "" || tokData(sf.GetToken()) != "0now-9" {
		t.Fatalf("StartFrom %v: want a rebuild snapshot from now-9", sf)
	}
	gaps, _ := h.ms.ListGaps(ctx, store.Scope{Stream: "orders"})
	if len(gaps) != 1 || gaps[0].Policy != store.GapRebuildFromSnapshot || tokData(gaps[0].FromToken) != "old" {
		t.Fatalf("gaps %+v", gaps)
	}
	sn, _, _ := h.ms.LoadSnapshot(ctx, store.Scope{Stream: "orders"})
	if sn.ID != sf.GetSnapshotId() || sn.Reason != store.SnapshotReasonRebuild || sn.State != store.SnapshotRunning {
		t.Fatalf("snapshot record %+v", sn)
	}
}

func TestSnapshotConfigNeedsStore(t *testing.T) {
	err := Config{Stream: "s", Store: memstore.New(memstore.Options{}), Positions: &fakePositions{},
		Gaps: memstore.New(memstore.Options{}), Snapshot: policy.Snapshot{Mode: policy.SnapshotInitial}}.validate()
	if err == nil {
		t.Fatal("a snapshot mode without Snapshots validated")
	}
}
