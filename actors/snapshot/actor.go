package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/backoff"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// runs numbers runs process-wide, so that the results and settlements of a run of an earlier
// actor instance never match a current one.
var runs atomic.Uint64

// liveGoroutines counts the goroutines of every run (tests assert it drops back to zero).
var liveGoroutines atomic.Int64

// spawn runs f on a new goroutine of a run, counted by the run's wg and by liveGoroutines.
func spawn(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	liveGoroutines.Add(1)
	go func() {
		defer liveGoroutines.Add(-1)
		defer wg.Done()
		f()
	}()
}

// Messages the actor's goroutines and timers send it: plain Go, stamped with the run.
type (
	loaded struct {
		run  uint64
		rec  store.Snapshot
		err  error
		done bool // the record says the snapshot is finished
	}
	chunkRead struct {
		run    uint64
		rng    int
		keys   []bson.Raw   // {_id: value} of each document
		events []wire.Event // each document's snapshot event (Raw set, Seq not yet)
		last   bool         // nothing follows this chunk in the range
	}
	readFailed struct {
		run uint64
		rng int
		err error
	}
	saved struct {
		run     uint64
		permits []int // ranges whose finished chunk this save made durable
		final   bool  // the save recorded State done
		err     error
	}
	windowRead struct {
		run         uint64
		first, last time.Time
		ok          bool
	}
	handoffMoved struct {
		run   uint64
		token bson.Raw
		at    time.Time
	}
	progressTick struct{ run uint64 }
	retryTick    struct{ run uint64 }
)

type snapshotActor struct {
	cfg        Config
	log        *zap.Logger
	self       *actor.PID
	sys        *actor.ActorSystem
	dispatcher *actor.PID
	cpPID      *actor.PID

	run      *run
	finished string // id of the snapshot this instance saw finish
	last     *messages.SnapshotStatus
}

// run is one run of a snapshot: from RunSnapshot (or a takeover) to its end, failure or cancel.
type run struct {
	n      uint64
	id     string
	inc    uint64
	to     *actor.PID
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	io     chan func() // the worker's queue

	rec     store.Snapshot
	ranges  []*rangeState
	builder eventBuilder
	credit  int
	seq     uint64

	saving, dirty bool
	permitsDue    []int // ranges waiting for the next save to make their chunk durable
	saveFailures  int
	finishing     bool

	started           time.Time
	docsAtStart       uint64
	deadLettered      uint64
	resumed           bool
	window            time.Duration
	windowKnown       bool
	atRisk            bool
	ticks             int
	progressT, retryT interface{ Stop() bool }
}

type rangeState struct {
	i      int
	permit chan struct{}
	cur    *chunk
	ended  bool
}

type chunk struct {
	keys     []bson.Raw
	events   []*wire.Event
	settled  []bool
	sent     int
	prefix   int
	last     bool
	firstSeq uint64
}

func newActor(cfg Config) *snapshotActor { return &snapshotActor{cfg: cfg, log: cfg.Logger} }

// Receive implements actor.Actor.
func (a *snapshotActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.sys = ctx.Self(), ctx.ActorSystem()
		a.dispatcher, a.cpPID = a.cfg.DispatcherPID, a.cfg.CheckpointerPID
		if p := ctx.Parent(); p != nil {
			if a.dispatcher == nil {
				a.dispatcher = actor.NewPID(p.Address, p.Id+"/"+a.cfg.Dispatcher)
			}
			if a.cpPID == nil {
				a.cpPID = actor.NewPID(p.Address, p.Id+"/"+a.cfg.Checkpointer)
			}
		}
	case *actor.Stopping:
		a.stopRun("snapshot actor stopping")
	case *actor.Restarting:
		a.stopRun("snapshot actor restarting")
	case *wire.RunSnapshot:
		a.onRun(ctx, m)
	case *wire.CancelSnapshot:
		if r := a.run; r != nil && m.GetIncarnation() == r.inc {
			a.log.Info("snapshot run cancelled; it resumes from its latest saved progress", zap.String("snapshot", r.id))
			a.saveNow(ctx)
			a.stopRun("cancelled")
			a.report(ctx, progress)
		}
	case *wire.SnapshotDemand:
		if r := a.run; r != nil && m.GetRun() == r.n {
			r.credit += int(m.GetCredit())
			a.dispatch(ctx)
		}
	case *wire.SnapshotSettled:
		if r := a.run; r != nil && m.GetRun() == r.n {
			a.onSettled(ctx, m)
		}
	case *loaded:
		if r := a.run; r != nil && m.run == r.n {
			a.onLoaded(ctx, m)
		}
	case *chunkRead:
		if r := a.run; r != nil && m.run == r.n {
			a.onChunk(ctx, m)
		}
	case *readFailed:
		if r := a.run; r != nil && m.run == r.n {
			a.fail(ctx, fmt.Errorf("snapshot %s: read range %d: %w", r.id, m.rng, m.err))
		}
	case *saved:
		if r := a.run; r != nil && m.run == r.n {
			a.onSaved(ctx, m)
		}
	case *windowRead:
		if r := a.run; r != nil && m.run == r.n {
			r.window, r.windowKnown = m.last.Sub(m.first), m.ok
			a.checkWindow(ctx)
		}
	case *handoffMoved:
		if r := a.run; r != nil && m.run == r.n && !r.finishing {
			r.rec.HandoffToken, r.rec.HandoffTime, r.dirty = m.token, bson.Timestamp{T: uint32(m.at.Unix())}, true
			if a.cpPID != nil {
				ctx.Send(a.cpPID, &wire.AdvanceHandoff{SnapshotId: r.id, Token: m.token})
			}
			a.checkWindow(ctx)
		}
	case *progressTick:
		if r := a.run; r != nil && m.run == r.n {
			a.onTick(ctx)
		}
	case *retryTick:
		if r := a.run; r != nil && m.run == r.n {
			r.retryT = nil
			a.saveNow(ctx)
		}
	}
}

// send returns a function that delivers msg to the actor from any goroutine.
func (a *snapshotActor) send(msg any) { a.sys.Root.Send(a.self, msg) }

// onRun starts (or takes over) the run of a snapshot.
func (a *snapshotActor) onRun(ctx actor.Context, m *wire.RunSnapshot) {
	to, id := ctx.Sender(), m.GetSnapshotId()
	if to == nil || id == "" {
		a.log.Warn("RunSnapshot without a sender or an id dropped")
		return
	}
	if id == a.finished {
		ctx.Send(to, &wire.SnapshotFinished{Incarnation: m.GetIncarnation(), SnapshotId: id})
		return
	}
	if r := a.run; r != nil {
		if r.id == id && m.GetIncarnation() >= r.inc {
			a.log.Info("snapshot run taken over by a new incarnation", zap.String("snapshot", id),
				zap.Uint64("incarnation", m.GetIncarnation()))
			r.inc, r.to = m.GetIncarnation(), to
			return
		}
		a.stopRun("superseded by snapshot " + id)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &run{n: runs.Add(1), id: id, inc: m.GetIncarnation(), to: to, ctx: rctx, cancel: cancel,
		io: make(chan func(), 64), builder: newEventBuilder(id, a.cfg.Database, a.cfg.Collection)}
	a.run = r
	spawn(&r.wg, func() {
		for {
			select {
			case <-rctx.Done():
				return
			case f := <-r.io:
				f()
			}
		}
	})
	a.submit(func() {
		rec, found, err := a.load(rctx)
		switch {
		case err != nil:
		case !found || rec.ID != id:
			err = fmt.Errorf("snapshot %s: no running record for stream %q (found %q)", id, a.cfg.Stream, rec.ID)
		case rec.Finished():
			a.send(&loaded{run: r.n, rec: rec, done: true})
			return
		case !rec.Planned:
			err = a.plan(rctx, &rec)
		}
		a.send(&loaded{run: r.n, rec: rec, err: err})
	})
}

// submit queues f on the run's worker goroutine.
func (a *snapshotActor) submit(f func()) {
	r := a.run
	select {
	case r.io <- f:
	default:
		// The queue holds at most the load, a save and a few window reads: never full in
		// practice. Should it be, the job waits on a goroutine of the run rather than being
		// dropped (a dropped save would hold a range's next chunk for ever).
		spawn(&r.wg, func() {
			select {
			case r.io <- f:
			case <-r.ctx.Done():
			}
		})
	}
}

func (a *snapshotActor) load(ctx context.Context) (sn store.Snapshot, ok bool, err error) {
	err = treekit.Bounded(ctx, a.cfg.IOTimeout, func(ctx context.Context) error {
		sn, ok, err = a.cfg.Store.LoadSnapshot(ctx, store.Scope{Stream: a.cfg.Stream, Instance: a.cfg.Instance})
		return err
	})
	return sn, ok, err
}

// plan splits the collection into ranges and saves the plan (on the worker goroutine).
func (a *snapshotActor) plan(ctx context.Context, rec *store.Snapshot) error {
	pctx, cancel := context.WithTimeout(ctx, a.cfg.IOTimeout)
	total, splits, err := a.cfg.Source.Plan(pctx, a.cfg.Policy.Partitions)
	cancel()
	if err != nil {
		return fmt.Errorf("plan the ranges: %w", err)
	}
	bounds := append([]bson.Raw{nil}, splits...)
	bounds = append(bounds, nil)
	rec.Ranges = make([]store.SnapshotRange, 0, len(bounds)-1)
	for i := 0; i+1 < len(bounds); i++ {
		rec.Ranges = append(rec.Ranges, store.SnapshotRange{Min: bounds[i], Max: bounds[i+1]})
	}
	rec.Planned, rec.Total, rec.UpdatedAt = true, total, a.cfg.Clock.Now()
	if err := treekit.Bounded(ctx, a.cfg.IOTimeout, func(ctx context.Context) error {
		return a.cfg.Store.SaveSnapshot(ctx, *rec)
	}); err != nil {
		return fmt.Errorf("save the plan: %w", err)
	}
	return nil
}

func (a *snapshotActor) onLoaded(ctx actor.Context, m *loaded) {
	r := a.run
	if m.done {
		// Finished by an earlier run (this actor restarted since): answer, report nothing new.
		a.finished = r.id
		ctx.Send(r.to, &wire.SnapshotFinished{Incarnation: r.inc, SnapshotId: r.id})
		a.stopRun("")
		return
	}
	if m.err != nil {
		a.fail(ctx, m.err)
		return
	}
	r.rec = m.rec
	r.started = a.cfg.Clock.Now()
	for i, rg := range r.rec.Ranges {
		r.docsAtStart += rg.Read
		if rg.Done || rg.Last != nil {
			r.resumed = true
		}
		st := &rangeState{i: i, permit: make(chan struct{}, 1), ended: rg.Done}
		st.permit <- struct{}{}
		r.ranges = append(r.ranges, st)
	}
	kind := started
	if r.resumed {
		kind = resumed
	}
	a.log.Info("snapshot "+map[milestone]string{started: "started", resumed: "resumed"}[kind],
		zap.String("snapshot", r.id), zap.Int("ranges", len(r.ranges)), zap.Uint64("documents_done", r.docsAtStart),
		zap.Uint64("estimated_total", r.rec.Total))
	if a.allDone() {
		a.complete(ctx)
		return
	}
	ctx.Request(a.dispatcher, &wire.SnapshotSubscribe{Run: r.n})
	for _, st := range r.ranges {
		if st.ended {
			continue
		}
		i, rg, permit := st.i, r.rec.Ranges[st.i], st.permit // read here: the actor goes on changing st
		spawn(&r.wg, func() { a.readRange(r, i, rg.Min, rg.Max, rg.Last, permit) })
	}
	if tok := r.rec.HandoffToken; len(tok) > 0 {
		spawn(&r.wg, func() { a.keepHandoff(r, tok) })
	}
	a.readWindow()
	a.armProgress()
	a.report(ctx, kind)
}

// keepHandoff reads an idle change stream from the handoff position while the run lasts: as long
// as it returns no event, its post-batch resume token is a later position that skips nothing,
// and every HandoffRefresh the handoff position moves there. The first event ends it: the
// position must stay before that change.
func (a *snapshotActor) keepHandoff(r *run, from bson.Raw) {
	cur, err := a.cfg.Source.Watch(r.ctx, from)
	if err != nil {
		if r.ctx.Err() == nil {
			a.log.Info("the snapshot's handoff position cannot be kept fresh: the idle change stream did not open",
				zap.String("snapshot", r.id), zap.Error(err))
		}
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), a.cfg.IOTimeout)
		defer cancel()
		_ = cur.Close(cctx)
	}()
	last := string(from)
	var sentAt time.Time
	for r.ctx.Err() == nil {
		if cur.TryNext(r.ctx) {
			a.log.Info("the collection changed during the snapshot: its handoff position stays before that change",
				zap.String("snapshot", r.id))
			return
		}
		if err := cur.Err(); err != nil {
			if r.ctx.Err() == nil {
				a.log.Info("the snapshot's idle change stream failed; the handoff position stays", zap.String("snapshot", r.id), zap.Error(err))
			}
			return
		}
		tok := cur.ResumeToken()
		now := a.cfg.Clock.Now()
		if len(tok) == 0 || string(tok) == last || (!sentAt.IsZero() && now.Sub(sentAt) < a.cfg.Policy.HandoffRefresh) {
			continue
		}
		last, sentAt = string(tok), now
		a.send(&handoffMoved{run: r.n, token: append(bson.Raw(nil), tok...), at: now})
	}
}

// readRange reads one range in chunks, one chunk ahead of the one being handled: it sends a
// chunk once the previous one is durable (permit).
func (a *snapshotActor) readRange(r *run, i int, min, max, after bson.Raw, permit <-chan struct{}) {
	limit := a.cfg.Policy.BatchSize
	for {
		ctx, cancel := context.WithTimeout(r.ctx, a.cfg.IOTimeout)
		docs, err := a.cfg.Source.Read(ctx, min, max, after, limit)
		cancel()
		if r.ctx.Err() != nil {
			return
		}
		if err != nil {
			a.send(&readFailed{run: r.n, rng: i, err: err})
			return
		}
		// The events are built here, on the range's goroutine, so that the ranges build theirs
		// in parallel; the actor only numbers them.
		keys, events := make([]bson.Raw, len(docs)), make([]wire.Event, len(docs))
		for j, doc := range docs {
			if keys[j], err = idOf(doc); err != nil {
				a.send(&readFailed{run: r.n, rng: i, err: err})
				return
			}
			events[j].Raw, _ = r.builder.build(doc, keys[j])
		}
		select {
		case <-permit:
		case <-r.ctx.Done():
			return
		}
		last := len(docs) < limit
		a.send(&chunkRead{run: r.n, rng: i, keys: keys, events: events, last: last})
		if last {
			return
		}
		after = keys[len(keys)-1]
	}
}

func (a *snapshotActor) onChunk(ctx actor.Context, m *chunkRead) {
	r := a.run
	st := r.ranges[m.rng]
	c := &chunk{last: m.last, firstSeq: r.seq + 1, keys: m.keys,
		events: make([]*wire.Event, len(m.events)), settled: make([]bool, len(m.events))}
	for i := range m.events {
		r.seq++
		m.events[i].Seq = r.seq
		c.events[i] = &m.events[i]
	}
	st.cur = c
	if len(c.events) == 0 {
		a.chunkDone(ctx, st)
		return
	}
	a.dispatch(ctx)
}

// dispatch sends the undispatched events of the current chunks within the credit, one
// SnapshotBatch per call.
func (a *snapshotActor) dispatch(ctx actor.Context) {
	r := a.run
	if r.credit <= 0 || r.finishing {
		return
	}
	var out []*wire.Event
	for progress := true; progress && r.credit > len(out); {
		progress = false
		for _, st := range r.ranges {
			c := st.cur
			if c == nil || c.sent == len(c.events) {
				continue
			}
			n := min(len(c.events)-c.sent, r.credit-len(out))
			out = append(out, c.events[c.sent:c.sent+n]...)
			c.sent += n
			progress = true
			if len(out) == r.credit {
				break
			}
		}
	}
	if len(out) == 0 {
		return
	}
	r.credit -= len(out)
	ctx.Send(a.dispatcher, &wire.SnapshotBatch{Run: r.n, Events: out})
}

func (a *snapshotActor) onSettled(ctx actor.Context, m *wire.SnapshotSettled) {
	r := a.run
	touched := map[*rangeState]bool{}
	for _, s := range m.GetSettled() {
		for _, st := range r.ranges {
			c := st.cur
			if c == nil || s.GetSeq() < c.firstSeq || s.GetSeq() >= c.firstSeq+uint64(len(c.events)) {
				continue
			}
			c.settled[s.GetSeq()-c.firstSeq] = true
			if s.GetOutcome() == messages.Outcome_OUTCOME_DEAD_LETTERED {
				r.deadLettered++
			}
			touched[st] = true
			break
		}
	}
	for st := range touched {
		c, rg := st.cur, &r.rec.Ranges[st.i]
		moved := false
		for c.prefix < len(c.settled) && c.settled[c.prefix] {
			c.prefix++
			rg.Read++
			moved = true
		}
		if moved {
			rg.Last = c.keys[c.prefix-1]
			r.dirty = true
		}
		if c.prefix == len(c.events) {
			a.chunkDone(ctx, st)
		}
	}
}

// chunkDone records the end of the range's current chunk and saves it at once; the range's next
// chunk is dispatched once that save succeeded.
func (a *snapshotActor) chunkDone(ctx actor.Context, st *rangeState) {
	r := a.run
	c := st.cur
	st.cur = nil
	r.dirty = true
	if c.last {
		st.ended = true
		r.rec.Ranges[st.i].Done = true
		if a.allDone() {
			a.complete(ctx)
			return
		}
	} else {
		r.permitsDue = append(r.permitsDue, st.i)
	}
	a.saveNow(ctx)
}

func (a *snapshotActor) allDone() bool {
	for _, st := range a.run.ranges {
		if !st.ended || st.cur != nil {
			return false
		}
	}
	return true
}

// complete marks the record done and saves it; finish follows the successful save.
func (a *snapshotActor) complete(ctx actor.Context) {
	r := a.run
	r.finishing = true
	now := a.cfg.Clock.Now()
	r.rec.State, r.rec.DoneAt, r.dirty = store.SnapshotDone, now, true
	a.saveNow(ctx)
}

// saveNow saves the record unless a save is under way (the result of that one saves again when
// something changed meanwhile).
func (a *snapshotActor) saveNow(ctx actor.Context) {
	r := a.run
	if r == nil || r.saving || !r.dirty {
		return
	}
	r.saving, r.dirty = true, false
	rec := r.rec.Clone()
	rec.UpdatedAt = a.cfg.Clock.Now()
	permits := r.permitsDue
	r.permitsDue = nil
	n := r.n
	a.submit(func() {
		err := treekit.Bounded(r.ctx, a.cfg.IOTimeout, func(ctx context.Context) error { return a.cfg.Store.SaveSnapshot(ctx, rec) })
		if r.ctx.Err() != nil {
			return
		}
		a.send(&saved{run: n, permits: permits, final: rec.State == store.SnapshotDone, err: err})
	})
}

func (a *snapshotActor) onSaved(ctx actor.Context, m *saved) {
	r := a.run
	r.saving = false
	if m.err != nil {
		r.saveFailures++
		r.permitsDue = append(m.permits, r.permitsDue...)
		r.dirty = true
		d := backoff.Delay(100*time.Millisecond, 30*time.Second, 2, r.saveFailures)
		a.log.Warn("snapshot progress save failed; retrying", zap.String("snapshot", r.id), zap.Error(m.err),
			zap.Int("failures", r.saveFailures), zap.Duration("retry_in", d))
		n := r.n
		r.retryT = a.cfg.Clock.AfterFunc(d, func() { a.send(&retryTick{run: n}) })
		return
	}
	r.saveFailures = 0
	for _, i := range m.permits {
		r.ranges[i].permit <- struct{}{}
	}
	if m.final {
		a.finish(ctx)
		return
	}
	a.saveNow(ctx)
}

// finish answers the run's requester and forgets the run.
func (a *snapshotActor) finish(ctx actor.Context) {
	r := a.run
	a.finished = r.id
	took := a.cfg.Clock.Now().Sub(r.started)
	a.log.Info("snapshot done", zap.String("snapshot", r.id), zap.Uint64("documents", a.documents()),
		zap.Uint64("dead_lettered", r.deadLettered), zap.Duration("took", took))
	a.report(ctx, done)
	ctx.Send(r.to, &wire.SnapshotFinished{Incarnation: r.inc, SnapshotId: r.id})
	a.stopRun("")
}

// fail ends the run with err: the requester fails its start, and the restart policy decides.
func (a *snapshotActor) fail(ctx actor.Context, err error) {
	r := a.run
	a.log.Warn("snapshot run failed; its progress is kept", zap.String("snapshot", r.id), zap.Error(err))
	st := a.status()
	st.Error = err.Error()
	a.last = st
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, st)
	}
	terminal := errors.Is(err, streamtree.ErrMixedIDTypes)
	ctx.Send(r.to, &wire.SnapshotFinished{Incarnation: r.inc, SnapshotId: r.id, Error: err.Error(), Cause: errdetail.Of(err),
		Terminal: terminal})
	a.stopRun("")
	if terminal {
		streamtree.Fail(ctx, err)
	}
}

// stopRun cancels the run's goroutines and timers (without waiting: they end by themselves).
func (a *snapshotActor) stopRun(why string) {
	r := a.run
	if r == nil {
		return
	}
	if why != "" {
		a.log.Debug("snapshot run stopped", zap.String("snapshot", r.id), zap.String("why", why))
	}
	a.run = nil
	if r.progressT != nil {
		r.progressT.Stop()
	}
	if r.retryT != nil {
		r.retryT.Stop()
	}
	r.cancel()
}

func (a *snapshotActor) armProgress() {
	r := a.run
	n := r.n
	r.progressT = a.cfg.Clock.AfterFunc(a.cfg.ProgressInterval, func() { a.send(&progressTick{run: n}) })
}

func (a *snapshotActor) onTick(ctx actor.Context) {
	r := a.run
	r.ticks++
	a.saveNow(ctx)
	if r.ticks%a.cfg.WindowCheckEvery == 0 {
		a.readWindow()
	}
	a.checkWindow(ctx)
	a.report(ctx, progress)
	a.armProgress()
}

func (a *snapshotActor) readWindow() {
	r := a.run
	n := r.n
	a.submit(func() {
		wctx, cancel := context.WithTimeout(r.ctx, a.cfg.IOTimeout)
		first, last, ok := a.cfg.Source.OplogWindow(wctx)
		cancel()
		if r.ctx.Err() == nil {
			a.send(&windowRead{run: n, first: first, last: last, ok: ok})
		}
	})
}

// checkWindow compares the expected end of the snapshot with the time its handoff position
// leaves the oplog (handoff time + window, the oplog dropping its oldest entries at the pace it
// gains new ones).
func (a *snapshotActor) checkWindow(ctx actor.Context) {
	r := a.run
	if !r.windowKnown || r.rec.HandoffTime.IsZero() {
		return
	}
	eta, ok := a.eta()
	if !ok {
		return
	}
	deadline := time.Unix(int64(r.rec.HandoffTime.T), 0).Add(r.window)
	risk := a.cfg.Clock.Now().Add(eta).After(deadline)
	if risk && !r.atRisk {
		a.log.Warn("the snapshot is expected to outlast the oplog window: its handoff position would be lost",
			zap.String("snapshot", r.id), zap.Duration("eta", eta), zap.Duration("oplog_window", r.window),
			zap.Time("handoff_lost_at", deadline))
		r.atRisk = true
		a.report(ctx, atRisk)
		return
	}
	r.atRisk = risk
}

func (a *snapshotActor) documents() uint64 {
	var n uint64
	for _, rg := range a.run.rec.Ranges {
		n += rg.Read
	}
	return n
}

// rate returns the documents per second settled by this run.
func (a *snapshotActor) rate() float64 {
	r := a.run
	el := a.cfg.Clock.Now().Sub(r.started).Seconds()
	if el <= 0 {
		return 0
	}
	return float64(a.documents()-r.docsAtStart) / el
}

func (a *snapshotActor) eta() (time.Duration, bool) {
	r := a.run
	rate := a.rate()
	done := a.documents()
	if rate <= 0 || r.rec.Total == 0 {
		return 0, false
	}
	if done >= r.rec.Total {
		return 0, true
	}
	return time.Duration(float64(r.rec.Total-done) / rate * float64(time.Second)), true
}

func (a *snapshotActor) status() *messages.SnapshotStatus {
	r := a.run
	st := &messages.SnapshotStatus{SnapshotId: r.id, Reason: r.rec.Reason, Running: !r.rec.Finished(), Done: r.rec.Finished(),
		Resumed: r.resumed, RangesTotal: uint32(len(r.rec.Ranges)), Documents: a.documents(), EstimatedTotal: r.rec.Total,
		DeadLettered: r.deadLettered, Rate: a.rate(), AtRisk: r.atRisk}
	for _, rg := range r.rec.Ranges {
		if rg.Done {
			st.RangesDone++
		}
	}
	if !r.rec.StartedAt.IsZero() {
		st.StartedAt = timestamppb.New(r.rec.StartedAt)
	}
	if !r.rec.DoneAt.IsZero() {
		st.DoneAt = timestamppb.New(r.rec.DoneAt)
	}
	if eta, ok := a.eta(); ok && !st.Done {
		st.Eta = durationpb.New(eta)
	}
	if r.windowKnown {
		st.OplogWindow = durationpb.New(r.window)
	}
	if r.atRisk {
		st.Warning = "the snapshot is expected to outlast the oplog window; its handoff position would leave the oplog before it ends"
	}
	return st
}

// report sends the status to the supervisor and the milestone's event to the Observer.
func (a *snapshotActor) report(ctx actor.Context, m milestone) {
	if a.run == nil {
		if a.last != nil && m == progress {
			st := proto.Clone(a.last).(*messages.SnapshotStatus)
			st.Running = false
			if p := ctx.Parent(); p != nil {
				ctx.Send(p, st)
			}
		}
		return
	}
	st := a.status()
	a.last = st
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, st)
	}
	announce(a.cfg.Observer, a.log, m, observe.Meta{Stream: a.cfg.Stream, Time: a.cfg.Clock.Now()}, st)
}
