package dispatcher

import (
	"testing"

	"github.com/watchtree/watchtree/messages"
)

// TestSettledRuns checks the encoding of settlements as runs: sorted by seq, split at a gap, an
// outcome change, an invalidate and a repeated seq, each with its last event's token only.
func TestSettledRuns(t *testing.T) {
	handled, filtered := messages.Outcome_OUTCOME_HANDLED, messages.Outcome_OUTCOME_FILTERED
	st := func(seq uint64, o messages.Outcome) settlement {
		return settlement{seq: seq, outcome: o, token: []byte{byte(seq)}}
	}
	inv := st(9, handled)
	inv.invalidate = true
	// Out of order, as lanes settle: 1-3 handled, 4 filtered, 5-6 handled, a gap, 8 handled, 9
	// an invalidate, 10 handled (after it).
	ss := []settlement{st(3, handled), st(1, handled), st(5, handled), st(4, filtered), st(2, handled),
		st(6, handled), inv, st(8, handled), st(10, handled)}
	type run struct {
		first      uint64
		count      uint32
		outcome    messages.Outcome
		token      byte
		invalidate bool
	}
	want := []run{{1, 3, handled, 3, false}, {4, 1, filtered, 4, false}, {5, 2, handled, 6, false},
		{8, 2, handled, 9, true}, {10, 1, handled, 10, false}}
	got := settledRuns(ss)
	if len(got) != len(want) {
		t.Fatalf("got %d runs %v, want %d", len(got), got, len(want))
	}
	for i, r := range got {
		g := run{r.FirstSeq, r.Count, r.Outcome, r.LastToken[0], r.Invalidate}
		if g != want[i] {
			t.Errorf("run %d = %+v, want %+v", i, g, want[i])
		}
	}
	// A repeated seq (never sent by the lanes, but the checkpointer must see it) starts a run.
	if got := settledRuns([]settlement{st(1, handled), st(1, handled)}); len(got) != 2 {
		t.Errorf("a repeated seq: %d runs, want 2", len(got))
	}
	// One lane's in-order batch is one run in two allocations (the runs and their pointers).
	in := make([]settlement, 256)
	for i := range in {
		in[i] = st(uint64(i+1), handled)
	}
	if n := testing.AllocsPerRun(100, func() { settledRuns(in) }); n > 2 {
		t.Errorf("settledRuns of an in-order batch: %v allocations, want <= 2", n)
	}
}
