package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
	"github.com/watchtree/watchtree/store/storetest"
)

func TestCheckpointContract(t *testing.T) {
	storetest.TestCheckpointStore(t, func(t *testing.T, now func() time.Time) store.CheckpointStore {
		return memstore.New(memstore.Options{Now: now})
	})
}

func TestGapContract(t *testing.T) {
	storetest.TestGapStore(t, func(t *testing.T) store.GapStore {
		return memstore.New(memstore.Options{})
	})
}

func TestDeadLetterContract(t *testing.T) {
	storetest.TestDeadLetterStore(t, func(t *testing.T, now func() time.Time) store.DeadLetterStore {
		return memstore.New(memstore.Options{Now: now})
	})
}

func TestFaultFailsWithoutChange(t *testing.T) {
	s := memstore.New(memstore.Options{})
	boom := errors.New("boom")
	s.SetFault(func(_ context.Context, op memstore.Op) error {
		if op == memstore.OpSave {
			return boom
		}
		return nil
	})
	ctx := context.Background()
	if err := s.Save(ctx, store.Checkpoint{Stream: "s"}); !errors.Is(err, boom) {
		t.Fatalf("Save with a fault: %v, want boom", err)
	}
	if _, ok, err := s.Load(ctx, store.Scope{Stream: "s"}); err != nil || ok {
		t.Fatalf("Load after a failed save: ok=%v err=%v", ok, err)
	}
	s.SetFault(nil)
	if err := s.Save(ctx, store.Checkpoint{Stream: "s"}); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Saves != 1 || got.Loads != 1 {
		t.Fatalf("Stats = %+v, want 1 save (the faulted one does not count) and 1 load", got)
	}
}

func TestBlockingFaultReturnsCtxErr(t *testing.T) {
	s := memstore.New(memstore.Options{})
	s.SetFault(func(ctx context.Context, _ memstore.Op) error { <-ctx.Done(); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.PutDeadLetter(ctx, store.DeadLetter{ID: "x", Stream: "s"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PutDeadLetter while the fault blocks: %v, want DeadlineExceeded", err)
	}
	s.SetFault(nil)
	if _, err := s.GetDeadLetter(context.Background(), store.Scope{Stream: "s"}, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the blocked put was stored: %v", err)
	}
}

func TestFencedCounted(t *testing.T) {
	s := memstore.New(memstore.Options{})
	ctx := context.Background()
	_ = s.Save(ctx, store.Checkpoint{Stream: "s", Epoch: 2})
	if err := s.Save(ctx, store.Checkpoint{Stream: "s", Epoch: 1}); !errors.Is(err, store.ErrFenced) {
		t.Fatal(err)
	}
	if got := s.Stats().Fenced; got != 1 {
		t.Fatalf("Stats().Fenced = %d, want 1", got)
	}
}

func BenchmarkSave(b *testing.B) {
	s := memstore.New(memstore.Options{})
	ctx := context.Background()
	cp := store.Checkpoint{Stream: "orders", Token: make([]byte, 64)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		cp.Settled = uint64(i)
		if err := s.Save(ctx, cp); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSnapshotContract(t *testing.T) {
	storetest.TestSnapshotStore(t, func(t *testing.T) store.SnapshotStore {
		return memstore.New(memstore.Options{})
	})
}

func TestLeaseContract(t *testing.T) {
	storetest.TestLeaseStore(t, func(t *testing.T) store.LeaseStore { return memstore.NewLeases(memstore.Options{}) })
}
