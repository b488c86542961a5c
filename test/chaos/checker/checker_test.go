package checker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/watchtree/watchtree/test/chaos/history"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var params = Params{
	Streams:      []Stream{{Name: "sl", Single: true, Lanes: 1}, {Name: "all", Lanes: 1}},
	Nodes:        []string{"n1", "n2"},
	MaxUnflushed: 2,
	GapSlack:     time.Second,
}

// clean is a history with no violation: three writes (one poison), seen by the SingleLeader
// stream on n1 (epoch 1) and then n2 (epoch 2, after n1's lease expired), and by the
// AllInstances stream on both nodes; n2 redelivers one write after its takeover.
func clean() []history.Record {
	w := func(ms int, key string, seq int64, op history.Op, poison bool) history.Record {
		return history.Record{Type: history.Write, Key: key, Seq: seq, Op: op, Poison: poison, Outcome: history.Committed, Start: at(ms)}
	}
	call := func(ms int, node, stream, key string, seq int64, ev string, poison bool) history.Record {
		r := history.Record{Type: history.Call, Node: node, Instance: node + "-1", Stream: stream, Key: key, Seq: seq, EventID: ev, Attempt: 1, Start: at(ms), End: at(ms + 5), Poison: poison}
		if poison {
			r.Err = "poison"
		}
		return r
	}
	recs := []history.Record{
		{Type: history.Lease, Node: "n1", Instance: "n1-1", Stream: "sl", Change: "acquired", Epoch: 1, Start: at(0)},
		{Type: history.Started, Node: "n1", Instance: "n1-1", Stream: "sl", Start: at(1)},
		{Type: history.Started, Node: "n1", Instance: "n1-1", Stream: "all", Start: at(1)},
		{Type: history.Started, Node: "n2", Instance: "n2-1", Stream: "all", Start: at(1)},
		w(10, "k1", 1, history.Insert, false),
		w(20, "k1", 2, history.Update, false),
		w(30, "p1", 1, history.Insert, true),
		{Type: history.Write, Key: "k9", Seq: 1, Op: history.Insert, Outcome: history.Aborted, Start: at(35)},
		call(40, "n1", "sl", "k1", 1, "e1", false),
		{Type: history.Checkpoint, Node: "n1", Instance: "n1-1", Stream: "sl", Epoch: 1, Pos: "0001", Start: at(50)},
		call(60, "n1", "sl", "k1", 2, "e2", false),
		call(41, "n1", "all", "k1", 1, "e1", false),
		call(42, "n1", "all", "k1", 2, "e2", false),
		call(43, "n1", "all", "p1", 1, "e3", true),
		{Type: history.DeadLetter, Node: "n1", Instance: "n1-1", Stream: "all", EventID: "e3", Start: at(50)},
		{Type: history.Checkpoint, Node: "n1", Instance: "n1-1", Stream: "all", Pos: "0003", Start: at(55)},
		call(44, "n2", "all", "k1", 1, "e1", false),
		call(45, "n2", "all", "k1", 2, "e2", false),
		call(46, "n2", "all", "p1", 1, "e3", true),
		{Type: history.DeadLetter, Node: "n2", Instance: "n2-1", Stream: "all", EventID: "e3", Start: at(51)},
		{Type: history.Fault, Kind: "sigkill", Node: "n1", Start: at(70), End: at(80)},
		{Type: history.Lease, Node: "n2", Instance: "n2-1", Stream: "sl", Change: "acquired", Epoch: 2, Start: at(200)},
		{Type: history.Started, Node: "n2", Instance: "n2-1", Stream: "sl", Start: at(201)},
		{Type: history.Checkpoint, Node: "n2", Instance: "n2-1", Stream: "sl", Epoch: 2, Pos: "0001", Start: at(202)},
		call(210, "n2", "sl", "k1", 2, "e2", false), // redelivered: n1 died before its next checkpoint
		call(220, "n2", "sl", "p1", 1, "e3", true),
		{Type: history.DeadLetter, Node: "n2", Instance: "n2-1", Stream: "sl", EventID: "e3", Start: at(230)},
		{Type: history.Checkpoint, Node: "n2", Instance: "n2-1", Stream: "sl", Epoch: 2, Pos: "0003", Start: at(240)},
	}
	return recs
}

func kinds(r *Report) []Kind {
	var out []Kind
	for _, v := range r.Violations {
		if !slices.Contains(out, v.Kind) {
			out = append(out, v.Kind)
		}
	}
	return out
}

func TestCleanHistoryHasNoViolation(t *testing.T) {
	r := Check(clean(), params)
	if len(r.Violations) > 0 {
		t.Fatalf("violations in a clean history: %v", r.Violations)
	}
	if r.Duplicates != 1 || r.Calls != 10 || r.Writes[history.Committed] != 3 || r.Poison != 1 || r.Faults["sigkill"] != 1 {
		t.Errorf("figures: duplicates %d calls %d writes %v poison %d faults %v", r.Duplicates, r.Calls, r.Writes, r.Poison, r.Faults)
	}
	if r.WorstFailover != 210*time.Millisecond-65*time.Millisecond || r.WorstFailoverStream != "sl" {
		t.Errorf("worst failover = %v on %q, want 145ms on sl", r.WorstFailover, r.WorstFailoverStream)
	}
}

// TestPlantedViolations: a history with one violation of each kind planted is reported with
// exactly that kind, in the view where it was planted.
func TestPlantedViolations(t *testing.T) {
	drop := func(recs []history.Record, match func(history.Record) bool) []history.Record {
		return slices.DeleteFunc(recs, match)
	}
	for _, tc := range []struct {
		kind  Kind
		view  string
		plant func([]history.Record) []history.Record
	}{
		{Lost, "all@n2", func(recs []history.Record) []history.Record {
			return drop(recs, func(r history.Record) bool {
				return r.Type == history.Call && r.Node == "n2" && r.Stream == "all" && r.Seq == 2
			})
		}},
		{Lost, "sl", func(recs []history.Record) []history.Record { // the poison write is never dead-lettered
			return drop(recs, func(r history.Record) bool { return r.Type == history.DeadLetter && r.Stream == "sl" })
		}},
		{Phantom, "all@n1", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "all", Key: "k9", Seq: 1, EventID: "e9", Attempt: 1, Start: at(48)})
		}},
		{Order, "all@n1", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "all", Key: "k1", Seq: 1, EventID: "e1", Attempt: 1, Start: at(47)})
		}},
		{Backward, "sl", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.Checkpoint, Node: "n2", Instance: "n2-1", Stream: "sl", Epoch: 2, Pos: "0002", Start: at(250)})
		}},
		{Deposed, "sl", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "sl", Key: "k1", Seq: 2, EventID: "e2", Attempt: 1, Start: at(205), End: at(206)})
		}},
		{EpochReuse, "sl", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.Lease, Node: "n1", Instance: "n1-2", Stream: "sl", Change: "acquired", Epoch: 2, Start: at(300)})
		}},
		{DeadLetters, "all@n1", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.DeadLetter, Node: "n1", Instance: "n1-1", Stream: "all", EventID: "e1", Start: at(52)})
		}},
		{Duplicates, "sl", func(recs []history.Record) []history.Record { // 4 redeliveries > 2 + 1 lane
			for i := range 3 {
				recs = append(recs, history.Record{Type: history.Call, Node: "n2", Instance: "n2-1", Stream: "sl", Key: "k1", Seq: 2, EventID: "e2", Attempt: 1, Start: at(211 + i)})
			}
			return recs
		}},
		{UnplannedGap, "all@n2", func(recs []history.Record) []history.Record {
			return append(recs, history.Record{Type: history.Gap, Node: "n2", Instance: "n2-1", Stream: "all", Start: at(60)})
		}},
	} {
		t.Run(fmt.Sprintf("%s in %s", tc.kind, tc.view), func(t *testing.T) {
			r := Check(tc.plant(clean()), params)
			if got := kinds(r); !slices.Equal(got, []Kind{tc.kind}) {
				t.Fatalf("kinds reported = %v, want [%s]: %v", got, tc.kind, r.Violations)
			}
			for _, v := range r.Violations {
				if v.View != tc.view {
					t.Errorf("violation in view %s, want %s: %v", v.View, tc.view, v)
				}
			}
		})
	}
}

// TestUncertainWriteMayArriveLate: a write whose call failed (outcome uncertain) may be applied
// after the key's next write; handling it after that one is the server's order, not a
// violation. The same inversion of an acknowledged write is one.
func TestUncertainWriteMayArriveLate(t *testing.T) {
	for _, out := range []history.Outcome{history.Uncertain, history.Committed} {
		recs := clean()
		for i := range recs {
			if recs[i].Type == history.Write && recs[i].Key == "k1" && recs[i].Seq == 1 {
				recs[i].Outcome = out
			}
		}
		// n1's AllInstances view handles k1's seq 2, then seq 1 again (a new event: the late write).
		recs = append(recs, history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "all", Key: "k1", Seq: 1, EventID: "e1-late", Attempt: 1, Start: at(47)})
		r := Check(recs, params)
		got := kinds(r)
		if out == history.Uncertain && slices.Contains(got, Order) {
			t.Errorf("an uncertain write handled after the next one reported as %v", r.Violations)
		}
		if out == history.Committed && !slices.Contains(got, Order) {
			t.Errorf("an acknowledged write handled after the next one not reported: %v", r.Violations)
		}
	}
}

// TestGapAfterCorruptTokenExcusesItsWindowOnly: a gap right after a corrupt-token fault of the
// stream excuses the writes committed from GapSlack before the fault to the gap, not later ones.
func TestGapAfterCorruptTokenExcusesItsWindowOnly(t *testing.T) {
	recs := clean()
	recs = slices.DeleteFunc(recs, func(r history.Record) bool {
		return r.Type == history.Call && r.Node == "n2" && r.Stream == "all" && r.Key == "k1"
	})
	recs = append(recs,
		history.Record{Type: history.Fault, Kind: "corrupt-token", Stream: "all", Node: "n2", Start: at(500), End: at(600)},
		history.Record{Type: history.Gap, Node: "n2", Instance: "n2-1", Stream: "all", Start: at(700)},
	)
	if r := Check(recs, params); len(r.Violations) > 0 {
		t.Fatalf("writes within the gap's window reported: %v", r.Violations)
	}
	recs = append(recs, history.Record{Type: history.Write, Key: "k5", Seq: 1, Op: history.Insert, Outcome: history.Committed, Start: at(800)},
		history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "all", Key: "k5", Seq: 1, EventID: "e5", Attempt: 1, Start: at(810)},
		history.Record{Type: history.Call, Node: "n2", Instance: "n2-1", Stream: "sl", Key: "k5", Seq: 1, EventID: "e5", Attempt: 1, Start: at(810)},
	)
	r := Check(recs, params)
	if r.Count(Lost) != 1 || len(r.Violations) != 1 || r.Violations[0].View != "all@n2" {
		t.Fatalf("a write after the gap, never handled by n2, must be lost in all@n2: %v", r.Violations)
	}
}

// TestDynamicStreamOwesWritesAfterItsSpawn: a stream spawned during the soak must handle every
// write committed after its first Spawn returned, and owes none before.
func TestDynamicStreamOwesWritesAfterItsSpawn(t *testing.T) {
	p := params
	p.Streams = append(slices.Clone(p.Streams), Stream{Name: "dyn-1", Single: true, Lanes: 1, Dynamic: true})
	recs := append(clean(),
		history.Record{Type: history.Note, Kind: "spawned", Node: "n1", Instance: "n1-1", Stream: "dyn-1", Start: at(15)},
		history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "dyn-1", Key: "k1", Seq: 2, EventID: "e2", Attempt: 1, Start: at(100)},
		history.Record{Type: history.Call, Node: "n1", Instance: "n1-1", Stream: "dyn-1", Key: "p1", Seq: 1, EventID: "e3", Attempt: 1, Start: at(101), Poison: true, Err: "poison"},
		history.Record{Type: history.DeadLetter, Node: "n1", Instance: "n1-1", Stream: "dyn-1", EventID: "e3", Start: at(102)},
	)
	if r := Check(recs, p); len(r.Violations) > 0 {
		t.Fatalf("k1#1, committed before the spawn, is not owed: %v", r.Violations)
	}
	recs = slices.DeleteFunc(recs, func(r history.Record) bool { return r.Stream == "dyn-1" && r.Key == "k1" })
	r := Check(recs, p)
	if r.Count(Lost) != 1 || len(r.Violations) != 1 || r.Violations[0].View != "dyn-1" {
		t.Fatalf("k1#2, committed after the spawn and never handled, must be lost in dyn-1: %v", r.Violations)
	}
}
