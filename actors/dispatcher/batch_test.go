package dispatcher

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/watchtree/watchtree/messages"
)

// batchRouter is a fakeRouter that is a Batcher: CallBatch records each batch's seqs and runs
// the handlers in order (the fake's unit commits when they all return nil); fail decides a
// batch's error and whether it asks for a split.
type batchRouter struct {
	*fakeRouter
	max  int
	fail func(seqs []uint64) (split bool, err error)
	skip func(seq uint64) bool

	mu      sync.Mutex
	batches [][]uint64
}

func (b *batchRouter) BatchLimits() (int, int) { return b.max, 1 << 20 }

func (b *batchRouter) CallBatch(ctx context.Context, invs []Invocation, out []BatchOutcome) (int, bool, error) {
	seqs := make([]uint64, len(invs))
	for i, inv := range invs {
		seqs[i] = parseCall(inv.(*fakeInv).raw, 0).seq
	}
	b.mu.Lock()
	b.batches = append(b.batches, seqs)
	b.mu.Unlock()
	if b.fail != nil {
		if split, err := b.fail(seqs); err != nil {
			return 0, split, err
		}
	}
	for i, inv := range invs {
		if b.skip != nil && b.skip(seqs[i]) {
			out[i] = BatchOutcome{Skipped: true, Detail: "already applied"}
			continue
		}
		if err := inv.Call(ctx, 1); err != nil {
			return 0, false, err
		}
	}
	return len(invs), false, nil
}

func (b *batchRouter) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, s := range b.batches {
		out = append(out, len(s))
	}
	return out
}

// TestBatchesOfOneLane: ten queued events of one lane run as batches of at most MaxEvents, in
// order, and settle handled; an event the batch reports skipped settles skipped and is
// reported. Every invocation is released once.
func TestBatchesOfOneLane(t *testing.T) {
	b := &batchRouter{fakeRouter: &fakeRouter{}, max: 4, skip: func(seq uint64) bool { return seq == 6 }}
	h := newHarness(t, b)
	h.subscribe(1)
	var evs []tev
	for i := uint64(1); i <= 10; i++ {
		evs = append(evs, mkEvent(i, "a"))
	}
	h.send(evs...)
	got := h.waitSettled(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	for seq, o := range got {
		want := messages.Outcome_OUTCOME_HANDLED
		if seq == 6 {
			want = messages.Outcome_OUTCOME_SKIPPED
		}
		if o != want {
			t.Errorf("seq %d settled %v, want %v", seq, o, want)
		}
	}
	b.mu.Lock()
	var order []uint64
	for _, s := range b.batches {
		if len(s) > 4 {
			t.Errorf("batch %v over MaxEvents 4", s)
		}
		order = append(order, s...)
	}
	b.mu.Unlock()
	if !slices.IsSorted(order) {
		t.Errorf("batches %v: out of order", b.batches)
	}
	if ev := h.ev.snapshot(); len(ev.skipped) != 1 || ev.skipped[0].EventID != "T00000006" || ev.skipped[0].Detail != "already applied" {
		t.Errorf("Skipped reports %+v", ev.skipped)
	}
	b.checkReleased(t)
}

// TestBatchHandlerErrorRunsEventsAlone: a batch that fails without a split runs its events
// alone, each with its retries, so the poison one alone is dead-lettered.
func TestBatchHandlerErrorRunsEventsAlone(t *testing.T) {
	b := &batchRouter{fakeRouter: &fakeRouter{handle: func(_ context.Context, c call) error {
		if c.seq == 3 {
			return errPermanent
		}
		return nil
	}}, max: 8}
	h := newHarness(t, b)
	h.subscribe(1)
	h.send(mkEvent(1, "a"), mkEvent(2, "a"), mkEvent(3, "a"), mkEvent(4, "a"), mkEvent(5, "a"))
	got := h.waitSettled(1, 2, 3, 4, 5)
	for seq, o := range got {
		want := messages.Outcome_OUTCOME_HANDLED
		if seq == 3 {
			want = messages.Outcome_OUTCOME_DEAD_LETTERED
		}
		if o != want {
			t.Errorf("seq %d settled %v, want %v", seq, o, want)
		}
	}
	if ev := h.ev.snapshot(); len(ev.dls) != 1 || ev.dls[0].EventID != "T00000003" {
		t.Errorf("dead letters %+v, want seq 3's alone", ev.dls)
	}
	if sizes := b.sizes(); len(sizes) != 1 || sizes[0] != 5 {
		t.Errorf("batches of %v, want one of 5, then each event alone", sizes)
	}
	b.checkReleased(t)
}

// TestBatchSplitsInHalves: a batch too large splits in halves down to one event, which runs
// alone; it never loops: at most one failed batch per settled batch or event.
func TestBatchSplitsInHalves(t *testing.T) {
	b := &batchRouter{fakeRouter: &fakeRouter{}, max: 8, fail: func(seqs []uint64) (bool, error) {
		if len(seqs) > 2 {
			return true, errors.New("TransactionTooLargeForCache")
		}
		return false, nil
	}}
	h := newHarness(t, b)
	h.subscribe(1)
	var evs []tev
	for i := uint64(1); i <= 8; i++ {
		evs = append(evs, mkEvent(i, "a"))
	}
	h.send(evs...)
	for seq, o := range h.waitSettled(1, 2, 3, 4, 5, 6, 7, 8) {
		if o != messages.Outcome_OUTCOME_HANDLED {
			t.Errorf("seq %d settled %v", seq, o)
		}
	}
	sizes := b.sizes()
	if len(sizes) < 3 || sizes[0] != 8 || sizes[1] != 4 || sizes[2] != 2 {
		t.Errorf("batch sizes %v, want 8, 4, then 2s", sizes)
	}
	if len(sizes) > 2*8 {
		t.Errorf("%d batches for 8 events: it loops", len(sizes))
	}
	b.checkReleased(t)
}
