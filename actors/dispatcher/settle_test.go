package dispatcher

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

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
	var scratch []seqIndex
	got := settledRuns(ss, &scratch)
	if len(got) != len(want) {
		t.Fatalf("got %d runs %v, want %d", len(got), got, len(want))
	}
	for i, r := range got {
		g := run{r.FirstSeq, r.Count, r.Outcome, r.LastToken[0], r.Invalidate}
		if g != want[i] {
			t.Errorf("run %d = %+v, want %+v", i, g, want[i])
		}
	}
	// A change event's settlement carries its raw event, not its token: the token of a run's
	// last event is read from that event's _id, and only for that one event.
	fromRaw := func(seq uint64) settlement {
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: fmt.Sprint("t", seq)}}}, {Key: "operationType", Value: "insert"}})
		if err != nil {
			t.Fatal(err)
		}
		return settlement{seq: seq, outcome: handled, raw: raw}
	}
	runs := settledRuns([]settlement{fromRaw(12), fromRaw(11), fromRaw(13)}, &scratch)
	if len(runs) != 1 || runs[0].Count != 3 {
		t.Fatalf("raw settlements 11-13: runs %v, want one of 3", runs)
	}
	if data, _ := bson.Raw(runs[0].LastToken).Lookup("_data").StringValueOK(); data != "t13" {
		t.Errorf("raw settlements 11-13: last token %v, want {_data: t13}", bson.Raw(runs[0].LastToken))
	}
	// A repeated seq (never sent by the lanes, but the checkpointer must see it) starts a run,
	// whether the seqs are dense (placed by offset) or spread (sorted).
	if got := settledRuns([]settlement{st(2, handled), st(1, handled), st(2, handled)}, &scratch); len(got) != 2 ||
		got[0].FirstSeq != 1 || got[0].Count != 2 || got[1].FirstSeq != 2 || got[1].Count != 1 {
		t.Errorf("a repeated seq: runs %v, want 1-2 and 2", got)
	}
	if got := settledRuns([]settlement{st(90, handled), st(1, handled), st(90, handled)}, &scratch); len(got) != 3 ||
		got[0].FirstSeq != 1 || got[1].FirstSeq != 90 || got[2].FirstSeq != 90 {
		t.Errorf("a repeated seq, spread: runs %v, want 1, 90, 90", got)
	}
	// One lane's in-order batch is one run in two allocations (the runs and their pointers; the
	// scratch is reused).
	in := make([]settlement, 256)
	for i := range in {
		in[i] = st(uint64(i+1), handled)
	}
	if n := testing.AllocsPerRun(100, func() { settledRuns(in, &scratch) }); n > 2 {
		t.Errorf("settledRuns of an in-order batch: %v allocations, want <= 2", n)
	}
}

// BenchmarkSettledRuns encodes a batch of 256 settlements as runs: in seq order (one lane), and
// as eight lanes leave them (each lane's seqs in order, the lanes interleaved unevenly).
func BenchmarkSettledRuns(b *testing.B) {
	mk := func(order func(i int) int) []settlement {
		ss := make([]settlement, 256)
		for i := range ss {
			seq := uint64(order(i) + 1)
			ss[i] = settlement{seq: seq, outcome: messages.Outcome_OUTCOME_HANDLED, token: []byte{byte(seq)}}
		}
		return ss
	}
	inOrder := mk(func(i int) int { return i })
	// Lane l holds seqs l, l+8, l+16...; lanes take turns in bursts of 1 to 4.
	var lanes [8][]int
	for s := range 256 {
		lanes[s%8] = append(lanes[s%8], s)
	}
	var interleaved []int
	for len(interleaved) < 256 {
		for l := range lanes {
			n := min(1+l%4, len(lanes[l]))
			interleaved = append(interleaved, lanes[l][:n]...)
			lanes[l] = lanes[l][n:]
		}
	}
	eight := mk(func(i int) int { return interleaved[i] })
	for _, bc := range []struct {
		name string
		ss   []settlement
	}{{"lanes=1", inOrder}, {"lanes=8", eight}} {
		b.Run(bc.name, func(b *testing.B) {
			work := make([]settlement, len(bc.ss))
			var scratch []seqIndex
			for b.Loop() {
				copy(work, bc.ss)
				if runs := settledRuns(work, &scratch); len(runs) != 1 {
					b.Fatalf("%d runs, want 1", len(runs))
				}
			}
		})
	}
}
