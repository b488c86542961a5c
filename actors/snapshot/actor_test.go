package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

const waitLimit = 10 * time.Second

// TestMain checks for leaked goroutines. protoactor's dead-letter throttle (started when a
// message reaches an actor the test already stopped, e.g. a settlement of the fake dispatcher)
// ends on its own timer, not on anything the snapshot actor owns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

func key(id int64) bson.Raw {
	b, _ := bson.Marshal(bson.D{{Key: "_id", Value: id}})
	return b
}

func idVal(k bson.Raw) int64 {
	if k == nil {
		return -1
	}
	return k.Lookup("_id").Int64()
}

// fakeSource serves documents {_id: 1..n} in memory and records every Read.
type fakeSource struct {
	n int64

	mu     sync.Mutex
	reads  []string // "min-max>after"
	fail   error
	window time.Duration // > 0: OplogWindow reports an oplog spanning it, ending now
}

func (f *fakeSource) Plan(_ context.Context, parts int) (uint64, []bson.Raw, error) {
	var splits []bson.Raw
	for i := 1; i < parts; i++ {
		splits = append(splits, key(1+f.n*int64(i)/int64(parts)))
	}
	return uint64(f.n), splits, nil
}

func (f *fakeSource) Read(_ context.Context, min, max, after bson.Raw, limit int) ([]bson.Raw, error) {
	f.mu.Lock()
	f.reads = append(f.reads, fmt.Sprintf("%d-%d>%d", idVal(min), idVal(max), idVal(after)))
	err := f.fail
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	lo, hi := int64(1), f.n+1
	if min != nil {
		lo = idVal(min)
	}
	if max != nil {
		hi = idVal(max)
	}
	if after != nil && idVal(after)+1 > lo {
		lo = idVal(after) + 1
	}
	var out []bson.Raw
	for id := lo; id < hi && len(out) < limit; id++ {
		d, _ := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "v", Value: 1}})
		out = append(out, d)
	}
	return out, nil
}

func (f *fakeSource) Watch(context.Context, bson.Raw) (IdleCursor, error) {
	return nil, errors.New("no change streams in this fake")
}

func (f *fakeSource) OplogWindow(context.Context) (time.Time, time.Time, bool) {
	if f.window <= 0 {
		return time.Time{}, time.Time{}, false
	}
	now := time.Now()
	return now.Add(-f.window), now, true
}

func (f *fakeSource) readLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reads...)
}

// fakeDispatcher grants credit and settles every snapshot event it receives, recording the
// documents (by _id) in settlement order.
type fakeDispatcher struct {
	mu      sync.Mutex
	settled map[int64]int
	ids     map[int64]string
	src     *actor.PID // the subscribed snapshot source
	self    *actor.PID
	// holdAfter > 0: only that many events settle; the rest wait in held until release.
	holdAfter int
	done      int
	held      []*wire.SnapshotBatch
}

type releaseCmd struct{}

func (d *fakeDispatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.self = ctx.Self()
	case *wire.SnapshotSubscribe:
		d.src = ctx.Sender()
		ctx.Respond(&wire.SnapshotDemand{Run: m.GetRun(), Credit: 64})
	case releaseCmd:
		d.holdAfter = 0
		for _, b := range d.held {
			d.settle(ctx, b)
		}
		d.held = nil
	case *wire.SnapshotBatch:
		if d.holdAfter > 0 && d.done >= d.holdAfter {
			d.held = append(d.held, m)
			return
		}
		d.done += len(m.GetEvents())
		d.settle(ctx, m)
	}
}

func (d *fakeDispatcher) settle(ctx actor.Context, m *wire.SnapshotBatch) {
	{
		var out []*wire.Settled
		d.mu.Lock()
		for _, ev := range m.GetEvents() {
			raw := bson.Raw(ev.GetRaw())
			id := raw.Lookup("documentKey", "_id").Int64()
			d.settled[id]++
			d.ids[id] = raw.Lookup("_id", "_data").StringValue()
			out = append(out, &wire.Settled{Seq: ev.GetSeq(), Outcome: messages.Outcome_OUTCOME_HANDLED})
		}
		d.mu.Unlock()
		ctx.Send(d.src, &wire.SnapshotSettled{Run: m.GetRun(), Settled: out})
		ctx.Send(d.src, &wire.SnapshotDemand{Run: m.GetRun(), Credit: uint32(len(out))})
	}
}

// kinds records the snapshot events reported to the Observer.
type kinds struct {
	mu     sync.Mutex
	seen   map[observe.Kind]int
	atRisk int // SnapshotProgress events with Snapshot.AtRisk
	last   observe.SnapshotStatus
}

func (k *kinds) OnEvent(ev observe.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen[ev.Kind()]++
	switch e := ev.(type) {
	case observe.SnapshotStarted:
		k.last = e.Snapshot
	case observe.SnapshotResumed:
		k.last = e.Snapshot
	case observe.SnapshotProgress:
		k.last = e.Snapshot
		if e.Snapshot.AtRisk {
			k.atRisk++
		}
	case observe.SnapshotDone:
		k.last = e.Snapshot
	}
}

func (k *kinds) count(kind observe.Kind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen[kind]
}

func (k *kinds) risks() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.atRisk
}

type harness struct {
	kinds *kinds
	t     *testing.T
	sys   *actor.ActorSystem
	disp  *fakeDispatcher
	pid   *actor.PID
	probe *actor.PID
	done  chan *wire.SnapshotFinished
	src   *fakeSource
	st    *memstore.Store
}

func newHarness(t *testing.T, src *fakeSource, st *memstore.Store, pol policy.Snapshot) *harness {
	t.Helper()
	h := &harness{kinds: &kinds{seen: map[observe.Kind]int{}}, t: t, sys: actor.NewActorSystem(), disp: &fakeDispatcher{settled: map[int64]int{}, ids: map[int64]string{}},
		done: make(chan *wire.SnapshotFinished, 4), src: src, st: st}
	t.Cleanup(h.sys.Shutdown)
	dpid := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return h.disp }))
	props, err := New(Config{Stream: "s", Database: "shop", Collection: "orders", Store: st, Source: src, Policy: pol,
		DispatcherPID: dpid, ProgressInterval: 5 * time.Millisecond, Observer: h.kinds})
	if err != nil {
		t.Fatal(err)
	}
	h.pid = h.sys.Root.Spawn(props)
	h.probe = h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*wire.SnapshotFinished); ok {
			h.done <- m
		}
	}))
	t.Cleanup(func() {
		_ = h.sys.Root.StopFuture(h.pid).Wait()
		deadline := time.Now().Add(waitLimit)
		for liveGoroutines.Load() != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // the run's goroutines end on their own after the cancel
		}
		if n := liveGoroutines.Load(); n != 0 {
			t.Errorf("%d snapshot goroutines outlived the actor", n)
		}
	})
	return h
}

func (h *harness) record(id string, ranges []store.SnapshotRange) {
	h.t.Helper()
	sn := store.Snapshot{Stream: "s", ID: id, State: store.SnapshotRunning, Reason: store.SnapshotReasonInitial,
		HandoffTime: bson.Timestamp{T: 1}, Planned: ranges != nil, Ranges: ranges, Total: uint64(h.src.n)}
	if err := h.st.SaveSnapshot(context.Background(), sn); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) run(id string, inc uint64) {
	h.sys.Root.RequestWithCustomSender(h.pid, &wire.RunSnapshot{Incarnation: inc, SnapshotId: id}, h.probe)
}

func (h *harness) finished() *wire.SnapshotFinished {
	h.t.Helper()
	select {
	case m := <-h.done:
		return m
	case <-time.After(waitLimit):
		h.t.Fatalf("no SnapshotFinished within %v; reads %v", waitLimit, h.src.readLog())
		return nil
	}
}

func (h *harness) load() store.Snapshot {
	h.t.Helper()
	sn, ok, err := h.st.LoadSnapshot(context.Background(), store.Scope{Stream: "s"})
	if err != nil || !ok {
		h.t.Fatalf("LoadSnapshot: %v %v", ok, err)
	}
	return sn
}

func TestRunCopiesEveryDocumentOnce(t *testing.T) {
	src := &fakeSource{n: 1000}
	h := newHarness(t, src, memstore.New(memstore.Options{}), policy.Snapshot{Partitions: 4, BatchSize: 30})
	h.record("snap1", nil)
	h.run("snap1", 7)
	if m := h.finished(); m.GetError() != "" || m.GetIncarnation() != 7 || m.GetSnapshotId() != "snap1" {
		t.Fatalf("SnapshotFinished %v", m)
	}
	h.disp.mu.Lock()
	for id := int64(1); id <= src.n; id++ {
		if h.disp.settled[id] != 1 {
			t.Errorf("document %d handled %d times", id, h.disp.settled[id])
		}
	}
	if got := h.disp.ids[17]; got != idPrefix+"snap1:shop.orders:12"+"1100000000000000" {
		t.Errorf("event ID of document 17 = %q", got)
	}
	h.disp.mu.Unlock()
	sn := h.load()
	if !sn.Finished() || sn.DoneAt.IsZero() || len(sn.Ranges) != 4 || !sn.Planned {
		t.Fatalf("record %+v: want done with 4 planned ranges", sn)
	}
	var read uint64
	for i, r := range sn.Ranges {
		read += r.Read
		if !r.Done {
			t.Errorf("range %d not done", i)
		}
	}
	if read != uint64(src.n) {
		t.Errorf("ranges read %d documents, want %d", read, src.n)
	}
	if h.kinds.count(observe.KindSnapshotStarted) != 1 || h.kinds.count(observe.KindSnapshotResumed) != 0 || h.kinds.count(observe.KindSnapshotDone) != 1 {
		t.Errorf("milestones %v: want one started and one done", h.kinds.seen)
	}
	h.kinds.mu.Lock()
	if last := h.kinds.last; !last.Done || last.Documents != uint64(src.n) || last.RangesDone != 4 {
		t.Errorf("last status %v", last)
	}
	h.kinds.mu.Unlock()
	// A finished snapshot answers at once, without reading anything.
	before := len(src.readLog())
	h.run("snap1", 8)
	if m := h.finished(); m.GetError() != "" || m.GetIncarnation() != 8 {
		t.Fatalf("second RunSnapshot: %v", m)
	}
	if n := len(src.readLog()); n != before {
		t.Errorf("a finished snapshot read %d chunks again", n-before)
	}
}

// TestRunResumesAfterProgress: a record with a finished range and a range half done: the run
// never reads the finished range and reads the other one after its saved progress.
func TestRunResumesAfterProgress(t *testing.T) {
	src := &fakeSource{n: 100}
	h := newHarness(t, src, memstore.New(memstore.Options{}), policy.Snapshot{Partitions: 2, BatchSize: 10})
	h.record("snap2", []store.SnapshotRange{
		{Max: key(51), Done: true, Read: 50},
		{Min: key(51), Last: key(77), Read: 27},
	})
	h.run("snap2", 1)
	if m := h.finished(); m.GetError() != "" {
		t.Fatalf("SnapshotFinished %v", m)
	}
	h.disp.mu.Lock()
	var ids []int64
	for id := range h.disp.settled {
		ids = append(ids, id)
	}
	h.disp.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) != 23 || ids[0] != 78 || ids[len(ids)-1] != 100 {
		t.Fatalf("resumed run handled %v; want 78..100 only", ids)
	}
	for _, r := range src.readLog() {
		if r[:2] == "-1" {
			t.Errorf("the finished range was read: %s", r)
		}
	}
	if sn := h.load(); !sn.Finished() || sn.Ranges[1].Read != 50 {
		t.Fatalf("record after the resume: %+v", sn)
	}
	if h.kinds.count(observe.KindSnapshotResumed) != 1 || h.kinds.count(observe.KindSnapshotStarted) != 0 {
		t.Errorf("milestones %v: want resumed, not started", h.kinds.seen)
	}
}

// TestSaveFailuresAreRetried: the store refuses the first progress saves; the run retries them
// and finishes, and a range's next chunk waits for the save of the previous one.
func TestSaveFailuresAreRetried(t *testing.T) {
	st := memstore.New(memstore.Options{})
	src := &fakeSource{n: 60}
	h := newHarness(t, src, st, policy.Snapshot{Partitions: 1, BatchSize: 20})
	h.record("snap3", nil)
	var fails atomic.Int32
	st.SetFault(func(_ context.Context, op memstore.Op) error {
		if op == memstore.OpSaveSnapshot { // the plan's save passes, the next three fail
			if n := fails.Add(1); n >= 2 && n <= 4 {
				return errors.New("store down")
			}
		}
		return nil
	})
	h.run("snap3", 1)
	if m := h.finished(); m.GetError() != "" {
		t.Fatalf("SnapshotFinished %v", m)
	}
	if fails.Load() < 5 || !h.load().Finished() {
		t.Fatalf("%d save attempts; record %+v", fails.Load(), h.load())
	}
}

// TestReadFailureFailsTheRun: a read error ends the run with the error; its progress stays.
func TestReadFailureFailsTheRun(t *testing.T) {
	src := &fakeSource{n: 50, fail: errors.New("connection reset")}
	h := newHarness(t, src, memstore.New(memstore.Options{}), policy.Snapshot{Partitions: 2, BatchSize: 10})
	h.record("snap4", nil)
	h.run("snap4", 3)
	m := h.finished()
	if m.GetError() == "" || m.GetTerminal() || m.GetIncarnation() != 3 {
		t.Fatalf("SnapshotFinished %v: want a transient error", m)
	}
	if sn := h.load(); sn.Finished() || !sn.Planned {
		t.Fatalf("record after the failure: %+v", sn)
	}
}

func TestEventBuilderStableIDs(t *testing.T) {
	b := newEventBuilder("s1", "db", "c")
	doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: "abc"}, {Key: "x", Value: 1}})
	k, err := idOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	raw1, tok1 := b.build(doc, k)
	raw2, _ := b.build(doc, k)
	if string(raw1) != string(raw2) {
		t.Fatal("the same document built two different events")
	}
	if err := raw1.Validate(); err != nil {
		t.Fatal(err)
	}
	if op := raw1.Lookup("operationType").StringValue(); op != operationType {
		t.Fatalf("operationType %q", op)
	}
	_, tokOther := newEventBuilder("s2", "db", "c").build(doc, k)
	if string(tok1) == string(tokOther) {
		t.Fatal("two snapshots gave a document the same event ID")
	}
	if _, err := idOf(bson.Raw{5, 0, 0, 0, 0}); err == nil {
		t.Fatal("a document without _id got a key")
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Policy: policy.Snapshot{BatchSize: -1}, ProgressInterval: -1}.validate()
	for _, field := range []string{"Config.Stream", "Config.Collection", "Config.Store", "Config.Source",
		"Config.Policy.BatchSize", "Config.ProgressInterval"} {
		if err == nil || !containsField(err.Error(), field) {
			t.Errorf("Validate: %v; want it to name %s", err, field)
		}
	}
}

func containsField(s, f string) bool {
	for i := 0; i+len(f) <= len(s); i++ {
		if s[i:i+len(f)] == f {
			return true
		}
	}
	return false
}

// TestOplogWindowAtRisk: the handoff position is old and the oplog short; once the rate is
// known, the expected end falls after the position leaves the oplog: KindAtRisk is reported
// and the status says so, with the window.
func TestOplogWindowAtRisk(t *testing.T) {
	src := &fakeSource{n: 500, window: time.Hour}
	h := newHarness(t, src, memstore.New(memstore.Options{}), policy.Snapshot{Partitions: 1, BatchSize: 50})
	h.disp.holdAfter = 50
	sn := store.Snapshot{Stream: "s", ID: "old", State: store.SnapshotRunning,
		HandoffTime: bson.Timestamp{T: uint32(time.Now().Add(-time.Hour + time.Second).Unix())}}
	if err := h.st.SaveSnapshot(context.Background(), sn); err != nil {
		t.Fatal(err)
	}
	h.run("old", 1)
	deadline := time.Now().Add(waitLimit)
	for h.kinds.risks() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no SnapshotProgress at risk; events %v", h.kinds.seen)
		}
		time.Sleep(time.Millisecond) // polling tick
	}
	h.kinds.mu.Lock()
	last := h.kinds.last
	h.kinds.mu.Unlock()
	if !last.AtRisk || last.Warning == "" || last.OplogWindow != time.Hour || last.ETA == 0 {
		t.Fatalf("status at risk %v", last)
	}
	h.sys.Root.Send(h.disp.self, releaseCmd{})
	if m := h.finished(); m.GetError() != "" {
		t.Fatalf("SnapshotFinished %v", m)
	}
}
