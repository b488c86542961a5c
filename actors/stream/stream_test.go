package stream

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
)

// checkSeqs asserts that events carry seqs from..from+len-1 in order, each with a copied raw
// event whose _id is its resume_token.
func checkSeqs(t *testing.T, evs []*wire.Event, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if want := from + uint64(i); ev.GetSeq() != want {
			t.Fatalf("event %d: seq %d, want %d", i, ev.GetSeq(), want)
		}
		id, err := bson.Raw(ev.GetRaw()).LookupErr("_id")
		if err != nil {
			t.Fatalf("event %d: raw has no _id: %v", i, err)
		}
		if !bytes.Equal(id.Value, ev.GetResumeToken()) || len(ev.GetResumeToken()) == 0 {
			t.Fatalf("event %d: resume_token %x is not the event's _id %x", i, ev.GetResumeToken(), id.Value)
		}
	}
}

// The stream opens from the checkpointer's StartFrom, reports Resubscribed (running), subscribes,
// and delivers events in batches of at most min(credit, MaxBatch), never beyond the credit; more
// Demand resumes it. The aggregate carries the comment "watchtree:orders".
func TestStreamBatchesWithinCredit(t *testing.T) {
	h := newHarness(t, harnessOpts{initCredit: 5, edit: func(c *Config) { c.MaxBatch = 3 }})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 20)

	h.waitEvents(5)
	eventually(t, "the reader waits for credit", func() bool {
		st := h.stats()
		return st.GetCredit() == 0 && st.GetEvents() == 5
	})
	if n := len(h.w.events()); n != 5 {
		t.Fatalf("%d events delivered with a credit of 5", n)
	}

	h.grant(7)
	h.waitEvents(12)
	h.grant(100)
	evs := h.waitEvents(20)
	if len(evs) != 20 {
		t.Fatalf("%d events, want 20", len(evs))
	}
	checkSeqs(t, evs, 1)
	for i, ev := range evs {
		if got := docID(ev.GetRaw()); got != i {
			t.Fatalf("event %d is of document %d", i, got)
		}
	}
	for _, b := range h.w.batchList() {
		n := len(b.GetRaw())
		if n > 3 {
			t.Fatalf("batch of %d events exceeds MaxBatch 3", n)
		}
		if n > 0 {
			// (Seqs are counted back from through_seq: checkSeqs above found them consecutive.)
			if len(b.GetPostBatchResumeToken()) == 0 {
				t.Fatal("event batch without a post-batch resume token")
			}
		}
		if b.GetIncarnation() != 1 {
			t.Fatalf("batch of incarnation %d, want 1", b.GetIncarnation())
		}
	}
	if subs := h.w.subscribeList(); len(subs) != 1 || subs[0].GetIncarnation() != 1 {
		t.Fatalf("subscribes %v, want one of incarnation 1", subs)
	}
	if msgs := h.w.checkpointerMsgs(); len(msgs) != 1 || msgs[0].(*wire.ResolveStart).GetIncarnation() != 1 {
		t.Fatalf("checkpointer got %v, want ResolveStart{1}", msgs)
	}

	aggs := h.srv.CommandsNamed("aggregate")
	found := false
	for _, a := range aggs {
		for _, e := range a.Body {
			if e.Key == "comment" && e.Value == "watchtree:orders" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no aggregate with comment watchtree:orders among %d aggregates", len(aggs))
	}
	pos := h.watcher.positions()
	if len(pos) != 1 || pos[0].Kind != messages.StartKind_START_KIND_RESUME_AFTER || !bytes.Equal(pos[0].Token, h.w.startToken) ||
		pos[0].MaxAwaitTime != 50*time.Millisecond || pos[0].Comment != "watchtree:orders" {
		t.Fatalf("opened at %+v", pos)
	}
	opened, _ := h.ev.snapshot()
	if len(opened) != 1 || opened[0].Position != "initial" || opened[0].Stream != "orders" {
		t.Fatalf("Started events %+v", opened)
	}
	h.noTransition()
}

// While idle, empty getMore rounds send PBRT-only batches (no events, through_seq = the last seq
// sent), only when the PBRT moved; they need no credit.
func TestStreamIdlePBRTBatches(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	other := h.client.Database("app").Collection("other")

	// Writes elsewhere move the cluster time, hence the PBRT of the orders stream.
	if _, err := other.InsertOne(h.ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a PBRT-only batch", func() bool { return len(h.w.batchList()) > 0 })
	h.insert(0, 1)
	h.waitEvents(1)
	if _, err := other.InsertOne(h.ctx, bson.D{{Key: "x", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a PBRT-only batch after the event", func() bool {
		bs := h.w.batchList()
		last := bs[len(bs)-1]
		return len(last.GetRaw()) == 0 && last.GetThroughSeq() == 1
	})

	bs := h.w.batchList()
	var prev []byte
	pbrtOnly := 0
	for i, b := range bs {
		if len(b.GetPostBatchResumeToken()) == 0 {
			t.Fatalf("batch %d without a PBRT", i)
		}
		if len(b.GetRaw()) == 0 {
			pbrtOnly++
			if bytes.Equal(b.GetPostBatchResumeToken(), prev) {
				t.Fatalf("batch %d repeats an unchanged PBRT", i)
			}
			if i == 0 && b.GetThroughSeq() != 0 {
				t.Fatalf("first PBRT batch through_seq %d, want 0", b.GetThroughSeq())
			}
		}
		if bytes.Equal(b.GetPostBatchResumeToken(), h.w.startToken) {
			t.Fatalf("batch %d repeats the start position as its PBRT", i)
		}
		prev = b.GetPostBatchResumeToken()
	}
	if pbrtOnly < 2 {
		t.Fatalf("%d PBRT-only batches, want >= 2", pbrtOnly)
	}
	if st := h.stats(); st.GetPbrtBatches() != uint64(pbrtOnly) || !bytes.Equal(st.GetLastPbrt(), prev) {
		t.Fatalf("stats %v: pbrt batches %d, last %x", st, pbrtOnly, prev)
	}
}

// A getMore failing with a non-resumable error (code 6 without ResumableChangeStreamError)
// survives the driver: the stream actor fails (errCursor wrapping the driver error), the
// supervisor backs off, and the restarted instance resolves its start again (incarnation 2),
// resumes after the last event and continues the seqs. The old reader goroutine ends.
func TestStreamCursorDeathFailsAndRestarts(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 3)
	h.waitEvents(3)

	h.failGetMore(bson.D{{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	var ce mongo.CommandError
	if !errors.Is(tr.Cause, errCursor) || !errors.As(tr.Cause, &ce) || ce.Code != 6 {
		t.Fatalf("death cause %v, want errCursor with the server's code 6", tr.Cause)
	}
	var f *streamtree.Failure
	var pe *streamtree.PanicError
	if !errors.As(tr.Cause, &f) || f.Incarnation != 1 || errors.As(tr.Cause, &pe) || strings.Contains(tr.Cause.Error(), "panic") {
		t.Fatalf("cause %T %v, want a Failure (not a panic) of incarnation 1", tr.Cause, tr.Cause)
	}
	if !strings.Contains(tr.Cause.Error(), "cursor died") {
		t.Fatalf("cause %v, want a dead cursor (not an open failure)", tr.Cause)
	}
	eventually(t, "the dead reader ended", func() bool { return liveReaders.Load() == 0 })

	h.clk.Advance(time.Second) // the policy's first delay
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(3, 5)
	evs := h.waitEvents(5)
	checkSeqs(t, evs, 1)
	for i, ev := range evs {
		if docID(ev.GetRaw()) != i {
			t.Fatalf("event %d is of document %d", i, docID(ev.GetRaw()))
		}
	}
	msgs := h.w.checkpointerMsgs()
	if len(msgs) != 2 || msgs[1].(*wire.ResolveStart).GetIncarnation() != 2 {
		t.Fatalf("checkpointer got %v, want ResolveStart{1}, ResolveStart{2}", msgs)
	}
	subs := h.w.subscribeList()
	if len(subs) != 2 || subs[1].GetIncarnation() != 2 {
		t.Fatalf("subscribes %v", subs)
	}
	for _, b := range h.w.batchList()[len(h.w.batchList())-1:] {
		if b.GetIncarnation() != 2 {
			t.Fatalf("batch after the restart of incarnation %d", b.GetIncarnation())
		}
	}
	eventually(t, "one reader goroutine after one restart", func() bool { return liveReaders.Load() == 1 })
}

// A closed connection on getMore is a network error the driver resumes by itself (a new
// aggregate): no failure, no duplicate, no gap.
func TestStreamCloseConnectionResumedByDriver(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 2)
	h.waitEvents(2)
	before := len(h.srv.CommandsNamed("aggregate"))

	h.failGetMore(bson.D{{Key: "closeConnection", Value: true}})
	eventually(t, "the driver resumed with a new aggregate", func() bool {
		return len(h.srv.CommandsNamed("aggregate")) > before
	})
	h.insert(2, 6)
	evs := h.waitEvents(6)
	checkSeqs(t, evs, 1)
	for i, ev := range evs {
		if docID(ev.GetRaw()) != i {
			t.Fatalf("event %d is of document %d", i, docID(ev.GetRaw()))
		}
	}
	h.noTransition()
	if pos := h.watcher.positions(); len(pos) != 1 {
		t.Fatalf("the stream actor reopened (%d opens); the driver should have resumed", len(pos))
	}
}

// Opening from a position the oplog no longer holds sends HistoryLost{code 286} to the
// checkpointer (no failure); its next StartFrom is opened and events flow with its next_seq.
func TestStreamHistoryLostAsksCheckpointer(t *testing.T) {
	var fresh bson.Raw
	h := newHarness(t, harnessOpts{before: func(h *harness) {
		h.insert(100, 103)
		h.srv.TruncateOplog(h.srv.ClusterTime())
		fresh = h.currentToken()
		h.w.answer = func(w *world, m proto.Message) *wire.StartFrom {
			switch m := m.(type) {
			case *wire.ResolveStart:
				return &wire.StartFrom{Incarnation: m.GetIncarnation(), Kind: messages.StartKind_START_KIND_RESUME_AFTER,
					Token: w.startToken, NextSeq: 7, Source: "event"}
			case *wire.HistoryLost:
				return &wire.StartFrom{Incarnation: m.GetIncarnation(), Kind: messages.StartKind_START_KIND_RESUME_AFTER,
					Token: fresh, NextSeq: 7, Source: "resumeFromNow"}
			}
			return nil
		}
	}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	msgs := h.w.checkpointerMsgs()
	if len(msgs) != 2 {
		t.Fatalf("checkpointer got %v, want ResolveStart then HistoryLost", msgs)
	}
	hl, ok := msgs[1].(*wire.HistoryLost)
	if !ok || hl.GetIncarnation() != 1 || hl.GetCode() != 286 || hl.GetMessage() == "" {
		t.Fatalf("second message %v, want HistoryLost{1, 286, message}", msgs[1])
	}
	h.insert(0, 2)
	evs := h.waitEvents(2)
	checkSeqs(t, evs, 7)
	pos := h.watcher.positions()
	if len(pos) != 2 || !bytes.Equal(pos[1].Token, fresh) {
		t.Fatalf("opens %+v, want the lost token then the fresh one", pos)
	}
	h.noTransition()
}

// With InvalidateRestart, a drop delivers the invalidate as an event (the last of its batch, with
// no PBRT), then the stream reopens with startAfter its token in the same incarnation, and events
// of the recreated collection continue the seqs.
func TestStreamInvalidateRestartsWithStartAfter(t *testing.T) {
	h := newHarness(t, harnessOpts{edit: func(c *Config) { c.InvalidateRestart = true }})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 1)
	h.waitEvents(1)
	if err := h.coll.Drop(h.ctx); err != nil {
		t.Fatal(err)
	}
	evs := h.waitEvents(3) // insert, drop, invalidate
	if opType(evs[1].GetRaw()) != "drop" || opType(evs[2].GetRaw()) != "invalidate" {
		t.Fatalf("events %q %q, want drop, invalidate", opType(evs[1].GetRaw()), opType(evs[2].GetRaw()))
	}
	if evs[0].GetInvalidate() || evs[1].GetInvalidate() || !evs[2].GetInvalidate() {
		t.Fatalf("Event.invalidate flags %v %v %v, want only the invalidate flagged",
			evs[0].GetInvalidate(), evs[1].GetInvalidate(), evs[2].GetInvalidate())
	}
	for _, b := range h.w.batchList() {
		if n := len(b.GetRaw()); n > 0 && opType(b.GetRaw()[n-1]) == "invalidate" && len(b.GetPostBatchResumeToken()) != 0 {
			t.Fatal("the invalidate's batch carries a PBRT")
		}
	}
	eventually(t, "reopened with startAfter", func() bool { return len(h.watcher.positions()) == 2 })
	pos := h.watcher.positions()[1]
	if pos.Kind != messages.StartKind_START_KIND_START_AFTER || !bytes.Equal(pos.Token, evs[2].GetResumeToken()) {
		t.Fatalf("reopened at %+v, want START_AFTER the invalidate token", pos)
	}
	h.insert(10, 12)
	evs = h.waitEvents(5)
	checkSeqs(t, evs, 1)
	if docID(evs[3].GetRaw()) != 10 || docID(evs[4].GetRaw()) != 11 {
		t.Fatalf("events after the reopen are of documents %d, %d", docID(evs[3].GetRaw()), docID(evs[4].GetRaw()))
	}
	_, inv := h.ev.snapshot()
	if len(inv) != 1 || inv[0].Action != policy.InvalidateRestart.String() || inv[0].Cause != "drop" || inv[0].Stream != "orders" {
		t.Fatalf("Invalidated events %+v", inv)
	}
	if opened, _ := h.ev.snapshot(); len(opened) != 2 || opened[1].Position != "after-invalidate" {
		t.Fatalf("Started events %+v, want the reopen after the invalidate", opened)
	}
	if subs := h.w.subscribeList(); len(subs) != 1 {
		t.Fatalf("%d subscribes; a reopen keeps the incarnation and its credit", len(subs))
	}
	if st := h.stats(); st.GetOpens() != 2 || st.GetInvalidations() != 1 || st.GetIncarnation() != 1 {
		t.Fatalf("stats %v", st)
	}
	h.noTransition()
}

// Without InvalidateRestart, the invalidate (a rename here) is delivered, then the stream fails
// terminally: the supervisor gives up (crashed) with a cause matching streamtree.ErrInvalidated.
func TestStreamInvalidateStopsTerminally(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 1)
	h.waitEvents(1)
	if err := h.client.Database("admin").RunCommand(h.ctx, bson.D{
		{Key: "renameCollection", Value: "app.orders"}, {Key: "to", Value: "app.orders2"}}).Err(); err != nil {
		t.Fatal(err)
	}
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_CRASHED)
	if !errors.Is(tr.Cause, streamtree.ErrInvalidated) {
		t.Fatalf("crash cause %v, want streamtree.ErrInvalidated", tr.Cause)
	}
	evs := h.waitEvents(3) // sent before the failure; the dispatcher's mailbox may lag the supervisor's
	if len(evs) != 3 || opType(evs[1].GetRaw()) != "rename" || opType(evs[2].GetRaw()) != "invalidate" {
		t.Fatalf("%d events delivered before the crash, want insert, rename, invalidate", len(evs))
	}
	_, inv := h.ev.snapshot()
	if len(inv) != 1 || inv[0].Action != policy.InvalidateStop.String() || inv[0].Cause != "rename" {
		t.Fatalf("Invalidated events %+v", inv)
	}
	eventually(t, "the reader ended", func() bool { return liveReaders.Load() == 0 })
}

// A transient StartFrom FAIL fails the stream (errStartFailed, backoff); a terminal one does not
// (the checkpointer escalated it), the stream waits in phase FAILED.
func TestStreamStartFromFail(t *testing.T) {
	terminal := false
	h := newHarness(t, harnessOpts{before: func(h *harness) {
		h.w.answer = func(w *world, m proto.Message) *wire.StartFrom {
			return &wire.StartFrom{Incarnation: incOf(m), Kind: messages.StartKind_START_KIND_FAIL,
				Reason: "capture the current position: boom", Terminal: terminal}
		}
	}})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if !errors.Is(tr.Cause, errStartFailed) || !strings.Contains(tr.Cause.Error(), "boom") || strings.Contains(tr.Cause.Error(), "panic") {
		t.Fatalf("cause %v, want errStartFailed with the reason, not a panic", tr.Cause)
	}
	h.w.mu.Lock()
	terminal = true
	h.w.mu.Unlock()
	h.clk.Advance(time.Second)
	eventually(t, "the restarted stream got its terminal FAIL", func() bool {
		return h.stats().GetPhase() == wire.StreamPhase_STREAM_PHASE_FAILED
	})
	if st := h.stats(); st.GetIncarnation() != 2 {
		t.Fatalf("stats %v", st)
	}
	if tr := <-h.trans; tr.To != messages.SupervisorState_SUPERVISOR_STATE_STARTING {
		t.Fatalf("transition to %v after the restart, want starting", tr.To)
	}
	h.noTransition()
	if pos := h.watcher.positions(); len(pos) != 0 {
		t.Fatalf("opened %d cursors after FAIL", len(pos))
	}
}

// A non-terminal StartFrom FAIL caused by a server error fails the stream with that error as
// its cause (code and message), named once in the text.
func TestStreamStartFromFailKeepsTheServerError(t *testing.T) {
	refused := mongo.CommandError{Code: 40324, Name: "Location40324", Message: "Unrecognized pipeline stage name: '$matchh'"}
	h := newHarness(t, harnessOpts{before: func(h *harness) {
		h.w.answer = func(w *world, m proto.Message) *wire.StartFrom {
			return &wire.StartFrom{Incarnation: incOf(m), Kind: messages.StartKind_START_KIND_FAIL,
				Reason: "capture the current position: " + refused.Error(), Cause: errdetail.Of(refused)}
		}
	}})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF) // the harness's classifier knows no server codes
	var se mongo.ServerError
	if !errors.Is(tr.Cause, errStartFailed) || !errors.As(tr.Cause, &se) || !se.HasErrorCode(40324) {
		t.Fatalf("cause %v, want errStartFailed wrapping the server's 40324", tr.Cause)
	}
	if text := tr.Cause.Error(); strings.Count(text, refused.Message) != 1 || !strings.Contains(text, "capture the current position: "+refused.Error()) {
		t.Fatalf("cause text %q, want the step and the server's error, once", text)
	}
}

// Stopping the stream (operator Stop) and restarting it (operator Restart) end the reader
// goroutine, whether it waits for credit or in a getMore; Demand of another incarnation is
// ignored.
func TestStreamStopAndRestartEndTheReader(t *testing.T) {
	h := newHarness(t, harnessOpts{initCredit: 1})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 3)
	h.waitEvents(1) // the reader now waits for credit

	h.sys.Root.Send(h.streamPID(), &wire.Demand{Incarnation: 99, Credit: 50})
	if st := h.stats(); st.GetCredit() != 0 || st.GetEvents() != 1 {
		t.Fatalf("stats after a stale Demand: %v", st)
	}

	if _, err := h.sys.Root.RequestFuture(h.sup, &messages.Restart{Reason: "test"}, waitLimit).Result(); err != nil {
		t.Fatal(err)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPING) // a graceful restart: the cursor closes first
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	evs := h.waitEvents(2) // incarnation 2 resumes after event 1 with a fresh credit of 1
	checkSeqs(t, evs, 1)
	eventually(t, "the old reader ended; one runs", func() bool { return liveReaders.Load() == 1 })

	h.grant(10)
	h.waitEvents(3) // the reader now waits in a getMore
	if _, err := h.sys.Root.RequestFuture(h.sup, &messages.Stop{Reason: "test"}, waitLimit).Result(); err != nil {
		t.Fatal(err)
	}
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STOPPED)
	eventually(t, "the reader ended after Stop", func() bool { return liveReaders.Load() == 0 })
}

// TestReaderEndedCarriesTheError: the error that ended a reader travels in its ReaderEnded (the
// actor reads no reader state to learn it), with the server's code and labels intact.
func TestReaderEndedCarriesTheError(t *testing.T) {
	r := &reader{cfg: &Config{HistoryLostCodes: defaultHistoryLostCodes}}
	err := fmt.Errorf("open: %w", mongo.CommandError{Code: 40324, Name: "Location40324",
		Message: "Unrecognized pipeline stage name: '$matchh'", Labels: []string{"x"}})
	end := r.failed(err, true, false)
	if end.GetEnd() != wire.ReaderEnd_READER_END_OPEN_FAILED || end.GetCode() != 40324 {
		t.Fatalf("ReaderEnded %v", end)
	}
	got := errdetail.Err(end.GetCause())
	var se mongo.ServerError
	if got == nil || got.Error() != err.Error() || !errors.As(got, &se) || !se.HasErrorCode(40324) || !se.HasErrorLabel("x") {
		t.Fatalf("cause %v (%T), want the server error with its code and label", got, got)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Stream: "s", Watcher: watcherFunc(nil)}
	if err := ok.validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Stream = "" }, "stream: Config.Stream must not be empty"},
		{func(c *Config) { c.Watcher = nil }, "stream: Config.Watcher must not be nil"},
		{func(c *Config) { c.MaxBatch = -1 }, "stream: Config.MaxBatch must be >= 1 (0 means the default 1024), got -1"},
		{func(c *Config) { c.MaxAwaitTime = -time.Second }, "stream: Config.MaxAwaitTime must be > 0 (0 means the default 1s), got -1s"},
		{func(c *Config) { c.CloseTimeout = -time.Second }, "stream: Config.CloseTimeout must be > 0 (0 means the default 5s), got -1s"},
		{func(c *Config) { c.HistoryLostCodes = []int32{286, 0} }, "stream: Config.HistoryLostCodes[1] must be > 0, got 0"},
		{func(c *Config) { c.Checkpointer, c.Dispatcher = "x", "x" }, `stream: Config.Dispatcher must differ from Checkpointer, both are "x"`},
	}
	for _, tc := range cases {
		c := ok
		tc.edit(&c)
		err := c.validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
		if _, err := New(c); err == nil {
			t.Errorf("New accepted an invalid config (%s)", tc.want)
		}
	}
	d := ok.withDefaults()
	if d.MaxBatch != 1024 || d.MaxAwaitTime != time.Second || d.CloseTimeout != 5*time.Second ||
		d.Checkpointer != "checkpointer" || d.Dispatcher != "dispatcher" || len(d.HistoryLostCodes) != 3 {
		t.Fatalf("defaults %+v", d)
	}
}
