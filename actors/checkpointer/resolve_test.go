package checkpointer

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

func TestCascadeSavedToken(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("saved"), Source: store.SourceEvent}); err != nil {
		t.Fatal(err)
	}
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "saved" {
		t.Fatalf("StartFrom %v, want RESUME_AFTER saved", sf)
	}
	if sf.GetNextSeq() != 1 || sf.GetSource() != store.SourceEvent {
		t.Fatalf("next_seq %d source %q", sf.GetNextSeq(), sf.GetSource())
	}
	if n := h.pos.count(); n != 0 {
		t.Fatalf("PositionSource called %d times with a saved checkpoint", n)
	}
	h.noEvent() // nothing written
}

func TestCascadeNoCheckpointCapturesAndPersistsBeforeReplying(t *testing.T) {
	var savedBeforeReply atomic.Bool
	h := newHarness(t, nil)
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave {
			// The reply cannot have been sent yet: the probe is empty while the save runs.
			savedBeforeReply.Store(len(h.probe) == 0)
		}
		return nil
	})
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "0now-1" {
		t.Fatalf("StartFrom %v, want RESUME_AFTER now-1", sf)
	}
	if !savedBeforeReply.Load() {
		t.Fatal("the initial position was not saved before the reply")
	}
	cp, ok := h.stored()
	if !ok || tokData(cp.Token) != "0now-1" || cp.Source != store.SourceInitial ||
		cp.ClusterTime != (bson.Timestamp{T: 1000, I: 1}) || cp.Owner != "instance-a" {
		t.Fatalf("stored %+v", cp)
	}
	ev := event[cpEvent](h)
	if ev.Checkpoint.Source != store.SourceInitial || ev.Settled != 0 {
		t.Fatalf("Checkpointed %+v", ev)
	}
}

func TestCascadeInitialCaptureFailureIsTransient(t *testing.T) {
	h := newHarness(t, nil)
	h.pos.set(nil, bson.Timestamp{}, errors.New("no primary"))
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || sf.GetTerminal() || !strings.Contains(sf.GetReason(), "no primary") {
		t.Fatalf("StartFrom %v, want transient FAIL", sf)
	}
	// Persist failure: also transient, and nothing adopted in memory.
	h.pos.set(tok("0now-2"), bson.Timestamp{T: 2000}, nil)
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave {
			return errors.New("disk full")
		}
		return nil
	})
	sf = h.resolve(2)
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || sf.GetTerminal() || !strings.Contains(sf.GetReason(), "disk full") {
		t.Fatalf("StartFrom %v, want transient FAIL", sf)
	}
	h.ms.SetFault(nil)
	sf = h.resolve(3)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "0now-2" {
		t.Fatalf("StartFrom %v, want RESUME_AFTER now-2", sf)
	}
	if _, ok := h.stored(); !ok {
		t.Fatal("no checkpoint stored")
	}
}

func TestCascadeLatestIgnoresSavedCheckpoint(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) { c.StartPosition = policy.Latest })
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("saved"), Source: store.SourceEvent}); err != nil {
		t.Fatal(err)
	}
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != "latest" {
		t.Fatalf("StartFrom %v, want RESUME_AFTER now-1 (latest)", sf)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != "0now-1" {
		t.Fatalf("stored %+v, want now-1", cp)
	}
	// A later start resumes (from memory) instead of capturing again.
	h.pos.set(tok("0now-2"), bson.Timestamp{}, nil)
	sf = h.resolve(2)
	if tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != sourceMemory {
		t.Fatalf("second start %v, want memory now-1", sf)
	}
}

// TestStartFailureCarriesTheServerError: a capture refused by the server answers a FAIL whose
// cause is the server's error, code included, so the classifier can see it is a configuration
// error rather than a transient one.
func TestStartFailureCarriesTheServerError(t *testing.T) {
	h := newHarness(t, nil)
	refused := mongo.CommandError{Code: 40324, Name: "Location40324", Message: "Unrecognized pipeline stage name: '$matchh'"}
	h.pos.set(nil, bson.Timestamp{}, refused)
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || sf.GetTerminal() {
		t.Fatalf("StartFrom %v, want a non-terminal FAIL", sf)
	}
	cause := errdetail.Err(sf.GetCause())
	var se mongo.ServerError
	if !errors.As(cause, &se) || !se.HasErrorCode(40324) || cause.Error() != refused.Error() {
		t.Fatalf("FAIL cause %v (%T), want the server's error with code 40324", cause, cause)
	}
	if !strings.HasSuffix(sf.GetReason(), ": "+refused.Error()) {
		t.Fatalf("reason %q does not end with the cause", sf.GetReason())
	}
}

func TestCascadeAtTime(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)
	h := newHarness(t, func(_ *harness, c *Config) { c.StartPosition = policy.At(at) })
	sf := h.resolve(1)
	want := &wire.OperationTime{Seconds: uint32(at.Unix())}
	if sf.GetKind() != messages.StartKind_START_KIND_START_AT_OPERATION_TIME ||
		sf.GetOperationTime().GetSeconds() != want.Seconds || sf.GetOperationTime().GetIncrement() != 0 {
		t.Fatalf("StartFrom %v, want START_AT %d", sf, want.Seconds)
	}
	cp, ok := h.stored()
	if !ok || cp.Token != nil || cp.ClusterTime.T != want.Seconds || cp.Source != store.SourceInitial {
		t.Fatalf("stored %+v", cp)
	}
	if h.pos.count() != 0 {
		t.Fatal("At must not capture the current position")
	}
	// Restart of the tree before any event: still START_AT from memory.
	sf = h.resolve(2)
	if sf.GetKind() != messages.StartKind_START_KIND_START_AT_OPERATION_TIME || sf.GetSource() != sourceMemory {
		t.Fatalf("restart %v", sf)
	}
}

func TestCascadeMemoryFirstAfterProgress(t *testing.T) {
	h := newHarness(t, nil)
	h.resolve(1)
	h.progress(1, 5, tok("pbrt-5"))
	h.settle(1, 1, 2, 3)
	h.sync()
	// Nothing written yet (SaveEvery 100, interval not elapsed), but a restart resumes from the
	// newest settled position.
	sf := h.resolve(2)
	if tokData(sf.GetToken()) != tokData(evTok(3)) || sf.GetSource() != sourceMemory || sf.GetNextSeq() != 6 {
		t.Fatalf("StartFrom %v, want memory ev3 next_seq 6", sf)
	}
	if cp, _ := h.stored(); tokData(cp.Token) != "0now-1" {
		t.Fatalf("stored %v, want the initial position still", tokData(cp.Token))
	}
	// Settlements of the old incarnation are dropped after the rebase.
	h.settle(1, 4, 5)
	fl := h.flush()
	if tokData(fl.GetToken()) != tokData(evTok(3)) || fl.GetLowWaterMark() != 5 {
		t.Fatalf("Flushed %v, want ev3 lwm 5 (rebased)", fl)
	}
	// The new incarnation's seqs start at 6.
	h.progress(2, 7, tok("pbrt-7"))
	h.settle(2, 6, 7)
	fl = h.flush()
	if tokData(fl.GetToken()) != "pbrt-7" || fl.GetLowWaterMark() != 7 {
		t.Fatalf("Flushed %v, want pbrt-7 lwm 7", fl)
	}
}

func TestStaleResolveStartDropped(t *testing.T) {
	h := newHarness(t, nil)
	h.resolve(3)
	h.request(&wire.ResolveStart{Incarnation: 2})
	h.sync()
	select {
	case m := <-h.probe:
		t.Fatalf("stale ResolveStart answered: %v", m)
	default:
	}
}

func TestHistoryLostFail(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("old"), Source: store.SourceEvent}); err != nil {
		t.Fatal(err)
	}
	h.resolve(1)
	sf := h.historyLost(1, 286, "resume point no longer in the oplog")
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || !sf.GetTerminal() || !strings.Contains(sf.GetReason(), "286") {
		t.Fatalf("StartFrom %v, want terminal FAIL", sf)
	}
	hl := event[observe.HistoryLost](h)
	if !errors.Is(hl.Err, streamtree.ErrHistoryLost) || !strings.Contains(hl.Err.Error(), "server error 286: resume point no longer in the oplog") ||
		hl.Policy != policy.Fail.String() {
		t.Fatalf("HistoryLost %+v", hl)
	}
	err := h.failure()
	if !errors.Is(err, streamtree.ErrHistoryLost) || !strings.Contains(err.Error(), "resume point no longer in the oplog") {
		t.Fatalf("escalated %v, want streamtree.ErrHistoryLost with the server's message", err)
	}
	if gaps, _ := h.ms.ListGaps(context.Background(), store.Scope{Stream: "orders"}); len(gaps) != 0 {
		t.Fatalf("gap recorded under Fail: %+v", gaps)
	}
}

func TestHistoryLostResumeFromNowRecordsGap(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) { c.OnHistoryLost = policy.ResumeFromNow })
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("old"),
		ClusterTime: bson.Timestamp{T: 10}, Source: store.SourceEvent}); err != nil {
		t.Fatal(err)
	}
	h.resolve(1)
	h.pos.set(tok("0now-9"), bson.Timestamp{T: 9000, I: 3}, nil)
	sf := h.historyLost(1, 286, "gone")
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "0now-9" ||
		sf.GetSource() != store.SourceResumeFromNow {
		t.Fatalf("StartFrom %v, want RESUME_AFTER now-9", sf)
	}
	hl := event[observe.HistoryLost](h)
	if hl.Policy != policy.ResumeFromNow.String() || !strings.Contains(hl.Err.Error(), "server error 286: gone") {
		t.Fatalf("HistoryLost %+v", hl)
	}
	g := event[store.Gap](h)
	gaps, err := h.ms.ListGaps(context.Background(), store.Scope{Stream: "orders"})
	if err != nil || len(gaps) != 1 {
		t.Fatalf("gaps %+v %v", gaps, err)
	}
	for _, got := range []store.Gap{g, gaps[0]} {
		if got.Stream != "orders" || tokData(got.FromToken) != "old" || got.FromTime.T != 10 ||
			tokData(got.ToToken) != "0now-9" || got.ToTime != (bson.Timestamp{T: 9000, I: 3}) ||
			got.Policy != store.GapResumeFromNow || got.Reason != "code 286: gone" ||
			!got.At.Equal(h.clk.Now()) || got.ID == "" {
			t.Fatalf("gap %+v", got)
		}
	}
	cp, _ := h.stored()
	if tokData(cp.Token) != "0now-9" || cp.Source != store.SourceResumeFromNow {
		t.Fatalf("stored %+v", cp)
	}
	if ev := event[cpEvent](h); ev.Checkpoint.Source != store.SourceResumeFromNow {
		t.Fatalf("Checkpointed %+v", ev)
	}
}

func TestHistoryLostGapWriteRetriedUntilSuccess(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) {
		c.OnHistoryLost = policy.ResumeFromNow
		c.RetryInitialDelay = 100 * time.Millisecond
		c.RetryMaxDelay = 300 * time.Millisecond
	})
	h.resolve(1)
	event[cpEvent](h) // initial
	var fails atomic.Int32
	fails.Store(4)
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpRecordGap && fails.Add(-1) >= 0 {
			return errors.New("gaps down")
		}
		return nil
	})
	h.request(&wire.HistoryLost{Incarnation: 1, Code: 136, Message: "capped"})
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
		h.armed(1)
		if d, _ := h.clk.NextDeadline(); d != want {
			t.Fatalf("gap retry delay %v, want %v", d, want)
		}
		select {
		case m := <-h.probe:
			t.Fatalf("replied before the gap was recorded: %v", m)
		default:
		}
		h.clk.Advance(want)
	}
	sf := next[*wire.StartFrom](h)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER {
		t.Fatalf("StartFrom %v", sf)
	}
	if gaps, _ := h.ms.ListGaps(context.Background(), store.Scope{Stream: "orders"}); len(gaps) != 1 || gaps[0].Reason != "code 136: capped" {
		t.Fatalf("gaps %+v", gaps)
	}
}

func TestHistoryLostRebuild(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	h := newHarness(t, func(_ *harness, c *Config) {
		c.OnHistoryLost = policy.Rebuild(func(ctx context.Context) error {
			calls.Add(1)
			if fail.Load() {
				return errors.New("rescan failed")
			}
			return nil
		})
	})
	h.resolve(1) // initial now-1
	event[cpEvent](h)
	h.pos.set(tok("0now-5"), bson.Timestamp{T: 5000, I: 7}, nil)

	// Error path: transient FAIL, no gap, nothing persisted, fn called once.
	sf := h.historyLost(1, 280, "fatal")
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || sf.GetTerminal() || !strings.Contains(sf.GetReason(), "rescan failed") {
		t.Fatalf("StartFrom %v, want transient FAIL", sf)
	}
	if calls.Load() != 1 {
		t.Fatalf("rebuild called %d times, want 1", calls.Load())
	}
	event[observe.HistoryLost](h)
	h.noEvent()
	if gaps, _ := h.ms.ListGaps(context.Background(), store.Scope{Stream: "orders"}); len(gaps) != 0 {
		t.Fatalf("gap recorded after a failed rebuild: %+v", gaps)
	}
	// The next start still resumes from the lost position (memory), loses it again, rebuilds.
	if sf := h.resolve(2); tokData(sf.GetToken()) != "0now-1" {
		t.Fatalf("restart %v", sf)
	}
	fail.Store(false)
	sf = h.historyLost(2, 280, "fatal")
	if sf.GetKind() != messages.StartKind_START_KIND_START_AT_OPERATION_TIME ||
		sf.GetOperationTime().GetSeconds() != 5000 || sf.GetOperationTime().GetIncrement() != 7 {
		t.Fatalf("StartFrom %v, want START_AT 5000/7", sf)
	}
	if calls.Load() != 2 {
		t.Fatalf("rebuild called %d times, want 2", calls.Load())
	}
	event[observe.HistoryLost](h)
	g := event[store.Gap](h)
	if g.Policy != store.GapRebuild || tokData(g.FromToken) != "0now-1" || g.FromTime.T != 1000 ||
		tokData(g.ToToken) != "0now-5" || g.ToTime != (bson.Timestamp{T: 5000, I: 7}) || g.Reason != "code 280: fatal" {
		t.Fatalf("gap %+v", g)
	}
	cp, _ := h.stored()
	if cp.Token != nil || cp.ClusterTime != (bson.Timestamp{T: 5000, I: 7}) || cp.Source != store.SourceRebuild {
		t.Fatalf("stored %+v", cp)
	}
	// A restart starts at T again, from memory.
	if sf := h.resolve(3); sf.GetKind() != messages.StartKind_START_KIND_START_AT_OPERATION_TIME || sf.GetOperationTime().GetSeconds() != 5000 {
		t.Fatalf("restart %v", sf)
	}
}

func TestNewInstanceOfSamePropsResumesFromStore(t *testing.T) {
	// A restart builds a new instance from the same props: its memory is empty, and Latest,
	// applied by the first instance, is not applied again.
	h := newHarness(t, func(_ *harness, c *Config) { c.StartPosition = policy.Latest })
	props, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := h.sys.Root.Spawn(props)
	h.sys.Root.RequestWithCustomSender(a, &wire.ResolveStart{Incarnation: 1}, h.probePID)
	if sf := next[*wire.StartFrom](h); sf.GetSource() != "latest" {
		t.Fatalf("first start %v", sf)
	}
	h.sys.Root.Send(a, &wire.Progress{Incarnation: 1, ThroughSeq: 2})
	h.sys.Root.Send(a, &wire.SettledBatch{Incarnation: 1, Runs: singleRuns(1, 2)})
	h.sys.Root.RequestWithCustomSender(a, &wire.Flush{}, h.probePID)
	if fl := next[*wire.Flushed](h); tokData(fl.GetToken()) != tokData(evTok(2)) {
		t.Fatalf("Flushed %v", fl)
	}
	if err := h.sys.Root.StopFuture(a).Wait(); err != nil {
		t.Fatal(err)
	}
	h.pos.set(tok("0now-2"), bson.Timestamp{}, nil)
	b := h.sys.Root.Spawn(props)
	defer func() { _ = h.sys.Root.StopFuture(b).Wait() }()
	h.sys.Root.RequestWithCustomSender(b, &wire.ResolveStart{Incarnation: 2}, h.probePID)
	sf := next[*wire.StartFrom](h)
	if tokData(sf.GetToken()) != tokData(evTok(2)) || sf.GetSource() != store.SourceEvent {
		t.Fatalf("StartFrom %v, want stored ev2", sf)
	}
}

// TestRestartCancelsRunningJob: a restart of the checkpointer cancels the job running on its I/O
// goroutine (here a Rebuild that waits for its context), the pending start is answered with a
// transient FAIL, the goroutine ends (goleak at cleanup) and the new instance works.
func TestRestartCancelsRunningJob(t *testing.T) {
	running := make(chan struct{})
	cancelled := make(chan struct{})
	h := newHarness(t, func(_ *harness, c *Config) {
		c.OnHistoryLost = policy.Rebuild(func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			close(cancelled)
			return ctx.Err()
		})
	})
	h.resolve(1)
	h.request(&wire.HistoryLost{Incarnation: 1, Code: 286, Message: "gone"})
	recv(t, running)
	h.sys.Root.Send(h.parentPID, restartChild{})
	select {
	case <-cancelled:
	case <-time.After(waitFor):
		t.Fatal("the rebuild's context was not cancelled by the restart")
	}
	sf := next[*wire.StartFrom](h)
	if sf.GetKind() != messages.StartKind_START_KIND_FAIL || sf.GetTerminal() {
		t.Fatalf("StartFrom %v, want transient FAIL", sf)
	}
	// The new instance has no memory: it loads the stored (initial) position.
	if sf := h.resolve(2); tokData(sf.GetToken()) != "0now-1" || sf.GetSource() != store.SourceInitial {
		t.Fatalf("after restart %v", sf)
	}
}

// TestHistoryLostPersistFailureStillResumes: once the gap is durable, a failed checkpoint write
// does not block the start: the new position is used (from memory), reported as a failed write
// and retried.
func TestHistoryLostPersistFailureStillResumes(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) {
		c.OnHistoryLost = policy.ResumeFromNow
		c.RetryInitialDelay = 50 * time.Millisecond
	})
	h.resolve(1)
	event[cpEvent](h)
	var down atomic.Bool
	down.Store(true)
	h.ms.SetFault(func(ctx context.Context, op memstore.Op) error {
		if op == memstore.OpSave && down.Load() {
			return errors.New("store down")
		}
		return nil
	})
	h.pos.set(tok("0now-3"), bson.Timestamp{T: 3000}, nil)
	sf := h.historyLost(1, 286, "gone")
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "0now-3" {
		t.Fatalf("StartFrom %v", sf)
	}
	event[observe.HistoryLost](h)
	event[store.Gap](h)
	if f := event[observe.CheckpointFailed](h); f.Err == nil {
		t.Fatalf("CheckpointFailed %+v", f)
	}
	h.sync()
	if d, _ := h.clk.NextDeadline(); d != 50*time.Millisecond {
		t.Fatalf("retry in %v, want 50ms", d)
	}
	down.Store(false)
	h.sync()
	h.clk.Advance(50 * time.Millisecond)
	ev := event[cpEvent](h)
	if tokData(ev.Checkpoint.Token) != "0now-3" || ev.Checkpoint.Source != store.SourceResumeFromNow {
		t.Fatalf("Checkpointed %+v", ev)
	}
}

// A start under a new, higher fencing epoch (a new SingleLeader term) re-saves the stored
// checkpoint under that epoch before replying, so that every later write of an older epoch is
// fenced; the position itself is unchanged.
func TestCascadeClaimsTheCheckpointUnderANewEpoch(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) { c.Epoch = func() int64 { return 7 } })
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("saved"), Source: store.SourceEvent,
		Epoch: 3, Owner: "old-leader"}); err != nil {
		t.Fatal(err)
	}
	sf := h.resolve(1)
	if sf.GetKind() != messages.StartKind_START_KIND_RESUME_AFTER || tokData(sf.GetToken()) != "saved" {
		t.Fatalf("StartFrom %v, want RESUME_AFTER saved", sf)
	}
	cp, ok := h.stored()
	if !ok || cp.Epoch != 7 || cp.Owner != "instance-a" || tokData(cp.Token) != "saved" || cp.Source != store.SourceEvent {
		t.Fatalf("stored %+v, want the saved position under epoch 7 owned by instance-a", cp)
	}
	err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("late"), Epoch: 3})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write of the old epoch after the claim: %v, want ErrFenced", err)
	}
}

// A claim refused because a newer epoch already holds the checkpoint fences the checkpointer.
func TestCascadeClaimFencedByANewerEpoch(t *testing.T) {
	h := newHarness(t, func(_ *harness, c *Config) { c.Epoch = func() int64 { return 2 } })
	if err := h.ms.Save(context.Background(), store.Checkpoint{Stream: "orders", Token: tok("saved"), Epoch: 5}); err != nil {
		t.Fatal(err)
	}
	h.request(&wire.ResolveStart{Incarnation: 1})
	if err := h.failure(); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("failure %v, want ErrFenced", err)
	}
}
