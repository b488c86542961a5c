package stream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/messages"
)

// scriptedCursor replays server batches: each TryNext returns the next document of the current
// batch, or loads the next batch (a getMore); ResumeToken is the current document's _id while
// the batch has more, else the batch's post-batch resume token, as the driver's is.
type scriptedCursor struct {
	mu      sync.Mutex
	batches [][]bson.Raw
	pbrts   []bson.Raw
	b, i    int // current batch and the index of the current document in it (-1 before the first)
	closed  bool
}

func newScriptedCursor(batches [][]bson.Raw, pbrts []bson.Raw) *scriptedCursor {
	return &scriptedCursor{batches: batches, pbrts: pbrts, i: -1}
}

func (c *scriptedCursor) TryNext(context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.i+1 < len(c.batches[c.b]) {
		c.i++
		return true
	}
	if c.b+1 < len(c.batches) {
		c.b, c.i = c.b+1, 0
		return len(c.batches[c.b]) > 0
	}
	return false // an empty getMore at the end of the script
}

func (c *scriptedCursor) Current() bson.Raw {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.batches[c.b][c.i]
}

func (c *scriptedCursor) ResumeToken() bson.Raw {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.i >= 0 && c.i+1 < len(c.batches[c.b]) {
		return c.batches[c.b][c.i].Lookup("_id").Document()
	}
	return c.pbrts[c.b]
}

func (c *scriptedCursor) RemainingBatchLength() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.batches[c.b]) - c.i - 1
}

func (c *scriptedCursor) Err() error { return nil }
func (c *scriptedCursor) Close(context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func tok(s string) bson.Raw {
	b, _ := bson.Marshal(bson.D{{Key: "_data", Value: s}})
	return b
}

func rawDoc(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitScript is a small insert A, an update E split into three fragments, one per getMore,
// and a small insert B, with the post-batch resume tokens a server sends.
func splitScript(t *testing.T) (batches [][]bson.Raw, pbrts []bson.Raw) {
	a := rawDoc(t, bson.D{{Key: "_id", Value: tok("A")}, {Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: 1}}}})
	frag := func(n int32, f bson.E) bson.Raw {
		return rawDoc(t, bson.D{{Key: "_id", Value: tok("E" + string('0'+rune(n)))},
			{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: n}, {Key: "of", Value: int32(3)}}}, f})
	}
	f1 := frag(1, bson.E{Key: "operationType", Value: "update"})
	f2 := frag(2, bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 5}, {Key: "v", Value: "new"}}})
	f3 := frag(3, bson.E{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: 5}, {Key: "v", Value: "old"}}})
	b := rawDoc(t, bson.D{{Key: "_id", Value: tok("B")}, {Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: 2}}}})
	return [][]bson.Raw{{a, f1}, {f2}, {f3, b}, {}}, []bson.Raw{tok("E1"), tok("E2"), tok("B"), tok("H")}
}

func checkReassembled(t *testing.T, h *harness) {
	t.Helper()
	evs := h.waitEvents(3)
	if len(evs) != 3 {
		t.Fatalf("%d events delivered, want 3 (the fragments are one event)", len(evs))
	}
	e := bson.Raw(evs[1].GetRaw())
	if evs[0].GetSeq()+1 != evs[1].GetSeq() || evs[1].GetSeq()+1 != evs[2].GetSeq() {
		t.Fatalf("seqs %d %d %d, want consecutive", evs[0].GetSeq(), evs[1].GetSeq(), evs[2].GetSeq())
	}
	if _, err := e.LookupErr("splitEvent"); err == nil {
		t.Fatalf("the reassembled event keeps splitEvent: %s", e)
	}
	if got := e.Lookup("operationType").StringValue(); got != "update" ||
		e.Lookup("fullDocument", "v").StringValue() != "new" || e.Lookup("fullDocumentBeforeChange", "v").StringValue() != "old" {
		t.Fatalf("reassembled event %s", e)
	}
	if got := bson.Raw(evs[1].GetResumeToken()).Lookup("_data").StringValue(); got != "E3" {
		t.Fatalf("the event's resume token is %s, want the last fragment's (E3)", got)
	}
	if got := e.Lookup("_id", "_data").StringValue(); got != "E3" {
		t.Fatalf("the event's _id is %s, want the last fragment's", got)
	}
	for _, b := range h.w.batchList() {
		if p := b.GetPostBatchResumeToken(); len(p) > 0 {
			if d := bson.Raw(p).Lookup("_data").StringValue(); d == "E1" || d == "E2" {
				t.Fatalf("a batch reported the position %s, inside the split event", d)
			}
		}
	}
}

// The fragments of a split event reach the dispatcher as one event, between its neighbours,
// and no reported position points inside it.
func TestStreamReassemblesSplitEvent(t *testing.T) {
	batches, pbrts := splitScript(t)
	cur := newScriptedCursor(batches, pbrts)
	h := newHarness(t, harnessOpts{edit: func(c *Config) {
		c.Watcher = watcherFunc(func(context.Context, Position) (Cursor, error) { return cur, nil })
	}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	checkReassembled(t, h)
	h.noTransition()
}

// With a credit of one event at a time the split event is still read whole, and the position
// reported with the event before it is that event's own token.
func TestStreamReassemblesSplitEventOneCreditAtATime(t *testing.T) {
	batches, pbrts := splitScript(t)
	cur := newScriptedCursor(batches, pbrts)
	h := newHarness(t, harnessOpts{initCredit: 1, edit: func(c *Config) {
		c.Watcher = watcherFunc(func(context.Context, Position) (Cursor, error) { return cur, nil })
	}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.waitEvents(1)
	h.grant(1)
	h.waitEvents(2)
	h.grant(1)
	checkReassembled(t, h)
	if len(h.w.violations) > 0 {
		t.Fatalf("credit violations: %v", h.w.violations)
	}
}

// A fragment without the ones before it fails the reader (errSplitEvent): the stream restarts
// from its checkpoint instead of delivering part of an event.
func TestStreamSplitFragmentOutOfSequenceFails(t *testing.T) {
	batches, pbrts := splitScript(t)
	batches[0] = batches[0][:1] // drop fragment 1
	cur := newScriptedCursor(batches, pbrts)
	h := newHarness(t, harnessOpts{edit: func(c *Config) {
		c.Watcher = watcherFunc(func(context.Context, Position) (Cursor, error) { return cur, nil })
	}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if !errors.Is(tr.Cause, errCursor) || !strings.Contains(tr.Cause.Error(), errSplitEvent.Error()) {
		t.Fatalf("cause %v, want errCursor wrapping errSplitEvent", tr.Cause)
	}
	for _, ev := range h.w.events() {
		if bson.Raw(ev.GetRaw()).Lookup("operationType").StringValue() == "update" {
			t.Fatal("part of a split event was delivered")
		}
	}
}
