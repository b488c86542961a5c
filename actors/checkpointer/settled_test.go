package checkpointer

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// serverTok is a resume token of the server's shape at cluster time (t, i), tagged n.
func serverTok(t, i uint32, n int) bson.Raw {
	return tok(fmt.Sprintf("82%08X%08X80%08X", t, i, n))
}

// nextSettled returns the next SettledThrough the parent got, as (seconds, increment).
func nextSettled(h *harness) bson.Timestamp {
	h.t.Helper()
	select {
	case m := <-h.settled:
		return bson.Timestamp{T: m.GetClusterTime().GetSeconds(), I: m.GetClusterTime().GetIncrement()}
	case <-time.After(waitFor):
		h.t.Fatal("no SettledThrough")
	}
	return bson.Timestamp{}
}

func noSettled(h *harness) {
	h.t.Helper()
	h.sync()
	select {
	case m := <-h.settled:
		h.t.Fatalf("unexpected SettledThrough %v", m)
	default:
	}
}

// TestSettledThroughReports: the checkpointer tells its parent the cluster time of its resume
// position as it moves: the start position at once, then at most every 50ms on the injected
// clock (the newest of a faster run), never past an unsettled event, at once before a Flushed,
// and never backwards.
func TestSettledThroughReports(t *testing.T) {
	h := newHarness(t, func(h *harness, cfg *Config) {
		h.pos.set(serverTok(100, 1, 0), bson.Timestamp{T: 100, I: 1}, nil)
	})
	h.resolve(1)
	if ts := nextSettled(h); ts != (bson.Timestamp{T: 100, I: 1}) {
		t.Fatalf("start position reported at %v, want 100.1", ts)
	}
	// Two events and the batch's PBRT; the second event is unsettled: the position stops at the
	// first, and that move is within 50ms of the last report, so it waits.
	h.progress(1, 2, serverTok(100, 9, 0))
	h.sys.Root.Send(h.cp, &wire.SettledBatch{Incarnation: 1, Runs: []*wire.SettledRun{
		{FirstSeq: 1, Count: 1, Outcome: messages.Outcome_OUTCOME_HANDLED, LastToken: serverTok(100, 4, 1)}}})
	noSettled(h)
	h.clk.Advance(settledReportEvery)
	if ts := nextSettled(h); ts != (bson.Timestamp{T: 100, I: 4}) {
		t.Fatalf("reported %v, want 100.4: the first event's, not past the unsettled second", ts)
	}
	// The second settles: the position is the PBRT, held back until Flush sends it at once.
	h.sys.Root.Send(h.cp, &wire.SettledBatch{Incarnation: 1, Runs: []*wire.SettledRun{
		{FirstSeq: 2, Count: 1, Outcome: messages.Outcome_OUTCOME_HANDLED, LastToken: serverTok(100, 6, 2)}}})
	noSettled(h)
	h.flush()
	if ts := nextSettled(h); ts != (bson.Timestamp{T: 100, I: 9}) {
		t.Fatalf("reported %v before Flushed, want the PBRT's 100.9", ts)
	}
	h.clk.Advance(time.Minute)
	noSettled(h) // nothing moved: nothing more
}
