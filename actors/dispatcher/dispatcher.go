package dispatcher

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// lanesSettled is the one LanesSettled value the lanes send (it has no fields).
var lanesSettled = &wire.LanesSettled{}

// generations numbers timer messages process-wide, so a tick of an earlier instance (queued
// across a restart) never matches a timer of the current one.
var generations atomic.Uint64

// attaches numbers AttachDispatcher messages process-wide, so that a FlowControl answering an
// earlier attach (of this instance or of an earlier one) is recognised and dropped.
var attaches atomic.Uint64

// dispatcher is the actor. Every field is touched only on the actor's goroutine, except what the
// lanes share through laneShared, lane queues and settleBuf.
type dispatcher struct {
	cfg  *Config // shared by every instance (the props keep one copy); never written
	log  *zap.Logger
	self *actor.PID
	sys  *actor.ActorSystem

	checkpointer *actor.PID

	// lanes
	sh     *laneShared
	lanes  []*lane
	stage  [][]item // per lane: items routed by the current message, pushed once per message
	settle *settleBuf
	spare  []settlement
	// runOrder is settledRuns' scratch: the seq order of the batch being encoded.
	runOrder []seqIndex
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	ended    bool // lanes cancelled and waited for

	// flow control
	incarnation uint64     // current subscribed incarnation
	stream      *actor.PID // where Demand goes
	credit      int        // granted to the current incarnation and not yet used
	inFlight    int        // accepted and not settled
	inLanes     int        // pushed to lanes (or staged) and not settled
	superseded  uint64     // change events of older incarnations the lanes skipped unhandled
	// readThrough is the cluster time of the newest batch's post-batch resume token (or its
	// read-through token, when later: a shared member), and
	// readReported the one last sent to the supervisor (reportCounts).
	readThrough, readReported time.Time
	paused                    bool
	held                      []item // accepted events waiting behind a barrier (Lanes > 1)
	barrier                   bool   // a keyless event is in lane 0; nothing else runs until it settles

	// the snapshot source (actors/snapshot): its events share the lanes, have a capacity of
	// their own and settle back to it, never to the checkpointer
	snapRun      uint64
	snapSrc      *actor.PID
	snapCredit   int
	snapInFlight int

	// the on-demand snapshot (window.go): the open window, its run and where its settlements go;
	// readThroughTS is the newest cluster time read (packed t<<32|i), from events and PBRTs
	win           *window
	onDemandRun   uint64
	onDemandSrc   *actor.PID
	readThroughTS uint64

	// settle limit (FlowControl.settle_limit): credit is granted only while the settlements
	// taken since the latest attach, plus inFlight and credit, stay within limit.
	attachID        uint64 // AttachDispatcher.attach of the latest attach
	settledAtAttach uint64 // counts.Settled at the latest attach
	limit           uint64
	limited         bool // limit is known for the latest attach
	awaitingLimit   bool // Config.AwaitSettleLimit: no credit until the latest attach is answered

	// settlement flushing
	pending    []settlement // taken from the lanes, not yet sent
	flushGen   uint64
	flushTimer clock.Timer

	// drain
	draining   bool
	drainTo    *actor.PID
	drainGen   uint64
	drainTimer clock.Timer
	drained    bool // Drained sent: the dispatcher accepts nothing anymore

	stats    wire.DispatcherStats
	counts   outcomeCounts
	reported outcomeCounts // counts as last reported to the parent (reportCounts)
	// countsGate spaces the SettlementCounts (reportCountsEvery); countsDue is set while counts
	// wait for the flush tick.
	countsGate treekit.Gate
	countsDue  bool
}

func newDispatcher(cfg *Config) *dispatcher {
	return &dispatcher{cfg: cfg, log: cfg.Logger}
}

// Receive implements actor.Actor.
func (d *dispatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.EventBatch:
		d.onBatch(ctx, m)
	case *wire.LanesSettled:
		d.onSettled(ctx)
	case *wire.Subscribe:
		d.onSubscribe(ctx, m)
	case *wire.SnapshotBatch:
		d.onSnapshotBatch(ctx, m)
	case *wire.SnapshotSubscribe:
		d.onSnapshotSubscribe(ctx, m)
	case *wire.WindowOpen:
		d.onWindowOpen(ctx, m)
	case *wire.WindowChunk:
		d.onWindowChunk(ctx, m)
	case *wire.FlowControl:
		d.onFlowControl(ctx, m)
	case *wire.SettleFlushTick:
		if d.flushTimer != nil && m.Generation == d.flushGen {
			d.flushTimer = nil
			d.takeSettled(ctx, true)
		}
	case *wire.Drain:
		d.onDrain(ctx, m)
	case *wire.DrainDeadline:
		if d.draining && m.Generation == d.drainGen {
			d.drainTimer = nil
			d.log.Warn("drain deadline passed; cancelling the handlers still running",
				zap.Int("unsettled", d.inFlight))
			d.stopLanes(ctx)
			d.finishDrain(ctx, true)
		}
	case *wire.DispatcherStatsRequest:
		ctx.Respond(d.snapshot())
	case *wire.AttachCheckpointer:
		d.checkpointer = actor.NewPID(m.Address, m.Id)
		d.attach(ctx)
	case *actor.Started:
		d.start(ctx)
	case *actor.Stopping:
		d.shutdown(ctx, "stopping")
	case *actor.Restarting:
		d.shutdown(ctx, "restarting")
	}
}

// start resolves the checkpointer and starts the lanes.
func (d *dispatcher) start(ctx actor.Context) {
	d.self, d.sys = ctx.Self(), ctx.ActorSystem()
	d.checkpointer = d.cfg.Checkpointer
	if d.checkpointer == nil {
		if p := ctx.Parent(); p != nil {
			d.checkpointer = actor.NewPID(p.Address, p.Id+"/"+d.cfg.CheckpointerName)
		}
	}
	d.attach(ctx)
	self, root := d.self, d.sys.Root
	d.settle = &settleBuf{wakeAt: d.cfg.SettleBatch, notify: func() { root.Send(self, lanesSettled) }}
	sh := &laneShared{
		stream:    d.cfg.Stream,
		instance:  d.cfg.Instance,
		router:    d.cfg.Router,
		retry:     d.cfg.Retry,
		rnd:       d.cfg.Rand,
		clk:       d.cfg.Clock,
		log:       d.log,
		obs:       d.cfg.Observer,
		dl:        d.cfg.DeadLetters,
		dlTimeout: d.cfg.DeadLetterTimeout,
		retention: d.cfg.DeadLetterRetention,
		settle:    d.settle,
		mayStart:  d.cfg.MayStart,
		wg:        &d.wg,
	}
	d.sh = sh
	sh.ctx, d.cancel = context.WithCancel(context.Background())
	d.lanes = make([]*lane, d.cfg.Lanes)
	d.stage = make([][]item, d.cfg.Lanes)
	for i := range d.lanes {
		d.lanes[i] = newLane(i, sh) // its goroutine starts with its first events
	}
	d.stats.Capacity = uint32(d.cfg.Capacity)
	d.stats.Lanes = uint32(d.cfg.Lanes)
	d.log.Debug("dispatcher started", zap.Int("lanes", d.cfg.Lanes), zap.Int("capacity", d.cfg.Capacity))
}

// attach tells the checkpointer where to send FlowControl, and starts a new count of the settle
// limit: the settlements taken so far are sent first, so that the checkpointer has received them
// all when it answers the attach.
func (d *dispatcher) attach(ctx actor.Context) {
	if d.checkpointer == nil {
		d.log.Warn("dispatcher has no checkpointer yet: Config.Checkpointer is nil and it has no parent; send AttachCheckpointer")
		return
	}
	d.flushAll(ctx)
	d.attachID = attaches.Add(1)
	d.settledAtAttach = d.counts.Settled
	d.limited = false
	d.awaitingLimit = d.cfg.AwaitSettleLimit
	ctx.Send(d.checkpointer, &wire.AttachDispatcher{Address: d.self.Address, Id: d.self.Id, Attach: d.attachID})
}

// limitFree is the credit the settle limit still allows: the limit minus the settlements taken
// since the attach, the events in flight and the unused credit. math.MaxInt without a limit, 0
// while one is awaited.
func (d *dispatcher) limitFree() int {
	switch {
	case d.awaitingLimit:
		return 0
	case !d.limited:
		return math.MaxInt
	}
	used := d.counts.Settled - d.settledAtAttach + uint64(d.inFlight) + uint64(d.credit)
	if used >= d.limit {
		return 0
	}
	return int(min(d.limit-used, uint64(math.MaxInt)))
}

// onSubscribe starts a new incarnation: its credit is whatever capacity the events still in
// flight (of older incarnations) leave free. The answer is always a Demand, possibly of 0; a
// repeated Subscribe of the current incarnation gets a Demand of 0 (its credit stands).
func (d *dispatcher) onSubscribe(ctx actor.Context, m *wire.Subscribe) {
	if m.Incarnation < d.incarnation {
		d.log.Debug("stale Subscribe dropped", zap.Uint64("incarnation", m.Incarnation), zap.Uint64("current", d.incarnation))
		return
	}
	sender := ctx.Sender()
	if sender == nil {
		d.log.Error("Subscribe without a sender: send it as a request so that Demand can be answered",
			zap.Uint64("incarnation", m.Incarnation))
		return
	}
	if m.Incarnation == d.incarnation && d.stream != nil {
		// A repeated Subscribe must not reset the credit: the stream may still hold what it was
		// granted, and granting it again could exceed Capacity. Answer with nothing new.
		d.log.Warn("repeated Subscribe of the current incarnation; no extra credit", zap.Uint64("incarnation", m.Incarnation))
		d.stream = sender
		ctx.Send(sender, &wire.Demand{Incarnation: d.incarnation, Credit: 0})
		return
	}
	if d.inFlight > 0 {
		d.log.Debug("new incarnation: queued events of the previous ones are skipped, its cursor reads them again",
			zap.Uint64("incarnation", m.Incarnation), zap.Int("in_flight", d.inFlight),
			zap.Uint64("skipped_so_far", d.superseded))
	}
	d.incarnation, d.stream, d.credit = m.Incarnation, sender, 0
	d.sh.current.Store(m.Incarnation)
	if d.cfg.AwaitSettleLimit {
		// A new incarnation may follow a restart of the checkpointer, which then knows neither
		// this dispatcher nor its count: attach again and wait for the answer.
		d.attach(ctx)
	}
	grant := 0
	if !d.paused && !d.draining && !d.drained {
		grant = min(max(d.cfg.Capacity-d.inFlight, 0), d.limitFree())
	}
	d.credit = grant
	ctx.Send(d.stream, &wire.Demand{Incarnation: d.incarnation, Credit: uint32(grant)})
}

// onBatch accepts a batch of the current incarnation within its credit: Progress to the
// checkpointer first, then the events to their lanes.
func (d *dispatcher) onBatch(ctx actor.Context, b *wire.EventBatch) {
	if b.Incarnation != d.incarnation || d.stream == nil {
		if b.Incarnation > d.incarnation {
			// No credit was ever granted to it: the stream actor broke the protocol, and its
			// events would be lost if dropped silently. Fail loudly.
			panic(fmt.Errorf("dispatcher: stream %q: EventBatch of incarnation %d before its Subscribe (current %d)",
				d.cfg.Stream, b.Incarnation, d.incarnation))
		}
		d.stats.StaleBatches++
		d.log.Debug("stale EventBatch dropped; the new cursor re-reads its events",
			zap.Uint64("incarnation", b.Incarnation), zap.Uint64("current", d.incarnation), zap.Int("events", len(b.Raw)))
		return
	}
	if d.draining || d.drained {
		d.stats.StaleBatches++
		d.log.Debug("EventBatch dropped while draining; its events stay unsettled and are re-read on the next start",
			zap.Int("events", len(b.Raw)))
		return
	}
	n := len(b.Raw)
	if uint64(n) > b.ThroughSeq {
		panic(fmt.Errorf("dispatcher: stream %q: EventBatch of %d events through seq %d (seqs start at 1; protocol error)",
			d.cfg.Stream, n, b.ThroughSeq))
	}
	if n > d.credit {
		panic(fmt.Errorf("dispatcher: stream %q: EventBatch of %d events exceeds the credit %d of incarnation %d (protocol error)",
			d.cfg.Stream, n, d.credit, b.Incarnation))
	}
	d.credit -= n
	d.inFlight += n
	d.stats.Accepted += uint64(n)
	if at, _, ok := tokentime.Of(b.PostBatchResumeToken); ok && at.After(d.readThrough) {
		d.readThrough = at
	}
	// A shared member's read-through point may be past its PBRT (the hub read on through
	// another collection's events): lag only, never a position, so it goes nowhere else.
	if at, _, ok := tokentime.Of(b.ReadThroughToken); ok && at.After(d.readThrough) {
		d.readThrough = at
	}
	if d.checkpointer != nil {
		ctx.Send(d.checkpointer, &wire.Progress{
			Incarnation: b.Incarnation, ThroughSeq: b.ThroughSeq, PostBatchResumeToken: b.PostBatchResumeToken,
		})
	}
	if n == 0 && d.win == nil {
		if _, ts, ok := tokentime.Of(b.PostBatchResumeToken); ok && pack(ts) > d.readThroughTS {
			d.readThroughTS = pack(ts)
		}
		if d.inFlight == 0 && d.snapInFlight == 0 && len(d.pending) == 0 {
			// An empty batch: a getMore waited MaxAwaitTime and found nothing. The stream is
			// idle, so the buffers of its last burst go (not on every drained batch of a
			// catch-up, which would grow them again at once).
			d.shrink()
		}
		d.reportCounts(ctx) // an idle stream's position moves on: its lag stays current
		return
	}
	d.acceptLive(ctx, b)
	if n == 0 {
		d.reportCounts(ctx)
	}
}

// acceptItem hands an accepted event to its lane, or holds it behind a barrier (once one event
// of a batch is held, the rest of the batch is too: held events keep their order). Call
// pushStaged after the batch.
func (d *dispatcher) acceptItem(it item) {
	switch {
	case len(d.held) > 0 || d.barrier:
		d.held = append(d.held, it)
	case d.cfg.Lanes == 1:
		d.stage[0] = append(d.stage[0], it)
		d.inLanes++
	case !d.route(it):
		d.held = append(d.held, it)
	}
}

// acceptSnapshot accepts snapshot events of run.
func (d *dispatcher) acceptSnapshot(events []*wire.Event, run uint64) {
	for _, ev := range events {
		d.acceptItem(item{ev: snapshotEvent(ev), incarnation: run, snap: true})
	}
	d.pushStaged()
}

// onSnapshotSubscribe makes the sender the snapshot source of run m.Run: a newer run replaces
// the older one (whose events still settle back to the new source, which drops them by run). It
// answers a SnapshotDemand with the free snapshot capacity.
func (d *dispatcher) onSnapshotSubscribe(ctx actor.Context, m *wire.SnapshotSubscribe) {
	sender := ctx.Sender()
	if m.GetRun() < d.snapRun || sender == nil {
		d.log.Debug("stale or senderless SnapshotSubscribe dropped", zap.Uint64("run", m.GetRun()), zap.Uint64("current", d.snapRun))
		return
	}
	if m.GetRun() == d.snapRun && d.snapSrc != nil {
		d.snapSrc = sender
		ctx.Send(sender, &wire.SnapshotDemand{Run: d.snapRun})
		return
	}
	d.snapRun, d.snapSrc, d.snapCredit = m.GetRun(), sender, 0
	grant := 0
	if !d.draining && !d.drained {
		grant = max(d.cfg.Capacity-d.snapInFlight, 0)
	}
	d.snapCredit = grant
	ctx.Send(sender, &wire.SnapshotDemand{Run: d.snapRun, Credit: uint32(grant)})
}

// onSnapshotBatch accepts snapshot events of the current run within its credit.
func (d *dispatcher) onSnapshotBatch(ctx actor.Context, b *wire.SnapshotBatch) {
	if b.GetRun() != d.snapRun || d.snapSrc == nil || d.draining || d.drained {
		d.stats.StaleBatches++
		d.log.Debug("SnapshotBatch dropped (stale run or draining); its documents are read again",
			zap.Uint64("run", b.GetRun()), zap.Uint64("current", d.snapRun), zap.Int("events", len(b.Events)))
		return
	}
	n := len(b.Events)
	if n > d.snapCredit {
		panic(fmt.Errorf("dispatcher: stream %q: SnapshotBatch of %d events exceeds the snapshot credit %d of run %d (protocol error)",
			d.cfg.Stream, n, d.snapCredit, b.GetRun()))
	}
	d.snapCredit -= n
	d.snapInFlight += n
	if n > 0 {
		d.acceptSnapshot(b.Events, b.GetRun())
	}
}

// replenishSnapshot grants the snapshot source its free capacity once it is worth a message.
func (d *dispatcher) replenishSnapshot(ctx actor.Context) {
	if d.draining || d.drained || d.snapSrc == nil {
		return
	}
	free := d.cfg.Capacity - d.snapInFlight - d.snapCredit
	if free <= 0 || (free < max(d.cfg.Capacity/4, 1) && d.snapInFlight > 0) {
		return
	}
	d.snapCredit += free
	ctx.Send(d.snapSrc, &wire.SnapshotDemand{Run: d.snapRun, Credit: uint32(free)})
}

// absorb accounts for settlements taken from the lanes: snapshot ones are sent back to the
// snapshot source at once; the others are counted and returned (compacted in place).
func (d *dispatcher) absorb(ctx actor.Context, taken []settlement) []settlement {
	var snaps []*wire.Settled
	var run uint64
	out := taken[:0]
	for i := range taken {
		s := taken[i]
		d.inLanes--
		if s.superseded {
			d.inFlight--
			d.superseded++
			continue
		}
		if !s.snap {
			d.inFlight--
			d.count(&s)
			out = append(out, s)
			continue
		}
		d.snapInFlight--
		if len(snaps) > 0 && s.incarnation != run {
			d.sendSnapshotSettled(ctx, run, snaps)
			snaps = nil
		}
		run = s.incarnation
		snaps = append(snaps, &wire.Settled{Seq: s.seq, Outcome: s.outcome})
	}
	if len(snaps) > 0 {
		d.sendSnapshotSettled(ctx, run, snaps)
	}
	clear(taken[len(out):])
	return out
}

func (d *dispatcher) sendSnapshotSettled(ctx actor.Context, run uint64, ss []*wire.Settled) {
	if run == d.onDemandRun && d.onDemandSrc != nil {
		ctx.Send(d.onDemandSrc, &wire.SnapshotSettled{Run: run, Settled: ss})
		return
	}
	if d.snapSrc != nil {
		ctx.Send(d.snapSrc, &wire.SnapshotSettled{Run: run, Settled: ss})
	}
}

// route stages it on its lane. It reports false when it must wait: it is a barrier and earlier
// events are still in the lanes, or a barrier is running.
func (d *dispatcher) route(it item) bool {
	if d.barrier {
		return false
	}
	key, ok := laneKey(it.ev.raw)
	if !ok {
		if d.inLanes > 0 {
			return false
		}
		d.barrier = true
		d.stage[0] = append(d.stage[0], it)
		d.inLanes++
		return true
	}
	i := laneOf(key, len(d.lanes))
	d.stage[i] = append(d.stage[i], it)
	d.inLanes++
	return true
}

// pushStaged hands the staged items to their lanes: one lock and one wake per lane per message.
// When the lanes may hold settlements back, the flush timer then runs until they are empty (see
// takeSettled).
func (d *dispatcher) pushStaged() {
	pushed := false
	for i, s := range d.stage {
		if len(s) == 0 {
			continue
		}
		d.lanes[i].push(s)
		clear(s)
		d.stage[i] = s[:0]
		pushed = true
	}
	if pushed && d.settle.holds() {
		d.armFlush()
	}
}

// releaseHeld routes held events in order until one has to wait again.
func (d *dispatcher) releaseHeld() {
	if len(d.held) == 0 || d.ended {
		return
	}
	i := 0
	for i < len(d.held) && d.route(d.held[i]) {
		i++
	}
	if i > 0 {
		n := copy(d.held, d.held[i:])
		clear(d.held[n:])
		d.held = d.held[:n]
		d.pushStaged()
	}
}

// onSettled takes the lanes' settlements when a lane woke the actor (LanesSettled).
func (d *dispatcher) onSettled(ctx actor.Context) { d.takeSettled(ctx, false) }

// takeSettled takes the lanes' settlements: counts them, sends them on in batches, frees
// capacity and, when a quarter of it is free, grants it again. On the flush tick (tick) it
// sends everything pending. While events are in the lanes the flush timer stays armed, so what
// a lane settled but has not woken the actor for is taken within SettleFlushInterval.
func (d *dispatcher) takeSettled(ctx actor.Context, tick bool) {
	taken, urgent := d.settle.take(d.spare)
	if len(taken) > 0 {
		own := d.absorb(ctx, taken)
		d.pending = append(d.pending, own...)
		clear(taken)
		if d.barrier && d.inLanes == 0 {
			d.barrier = false
		}
		d.releaseHeld()
	}
	d.spare = taken[:0]
	batch := d.cfg.SettleBatch
	for len(d.pending) >= batch {
		d.sendSettled(ctx, d.pending[:batch])
		d.pending = d.pending[:copy(d.pending, d.pending[batch:])]
	}
	if len(d.pending) > 0 && (d.inFlight == 0 || urgent || tick) {
		d.flushAll(ctx)
	} else if tick && d.countsDue {
		d.reportCountsEvery(ctx)
	}
	if len(d.pending) > 0 || (d.inLanes > 0 && d.settle.holds()) || d.countsDue {
		d.armFlush()
	}
	if d.draining && d.inFlight == 0 && d.snapInFlight == 0 {
		d.finishDrain(ctx, false)
		return
	}
	d.replenish(ctx)
	d.replenishSnapshot(ctx)
}

// armFlush starts the flush timer (SettleFlushInterval, on Clock) unless it runs.
func (d *dispatcher) armFlush() {
	if d.flushTimer != nil || d.ended {
		return
	}
	d.flushGen = generations.Add(1)
	gen, self, root := d.flushGen, d.self, d.sys.Root
	d.flushTimer = d.cfg.Clock.AfterFunc(d.cfg.SettleFlushInterval, func() {
		root.Send(self, &wire.SettleFlushTick{Generation: gen})
	})
}

func (d *dispatcher) count(s *settlement) {
	c := &d.counts
	c.Settled++
	switch s.outcome {
	case messages.Outcome_OUTCOME_HANDLED:
		c.Handled++
	case messages.Outcome_OUTCOME_FILTERED:
		c.Filtered++
	case messages.Outcome_OUTCOME_UNHANDLED:
		c.Unhandled++
	case messages.Outcome_OUTCOME_SKIPPED:
		c.Skipped++
	case messages.Outcome_OUTCOME_DEAD_LETTERED:
		if s.dropped {
			c.Dropped++
		} else {
			c.DeadLettered++
		}
	}
}

// flushAll sends every pending settlement and disarms the flush timer.
func (d *dispatcher) flushAll(ctx actor.Context) {
	if d.flushTimer != nil {
		d.flushTimer.Stop()
		d.flushTimer = nil
		d.flushGen = 0
	}
	for len(d.pending) > 0 {
		n := min(len(d.pending), d.cfg.SettleBatch)
		d.sendSettled(ctx, d.pending[:n])
		d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	}
	clear(d.pending[len(d.pending):cap(d.pending)])
	if d.countsDue { // counts waiting for the tick just disarmed: now when stopping, else on a new tick
		if d.ended || d.draining {
			d.reportCountsEvery(ctx)
		} else {
			d.armFlush()
		}
	}
}

// sendSettled sends ss to the checkpointer, one SettledBatch per run of equal incarnations,
// each as runs of consecutive seqs with one outcome (see SettledRun), in seq order: lanes
// settle out of order, and a batch is a set to the checkpointer, which moves its low-water mark
// once per batch.
func (d *dispatcher) sendSettled(ctx actor.Context, ss []settlement) {
	for len(ss) > 0 {
		inc := ss[0].incarnation
		n := 1
		for n < len(ss) && ss[n].incarnation == inc {
			n++
		}
		batch := ss[:n]
		ss = ss[n:]
		if d.checkpointer != nil {
			ctx.Send(d.checkpointer, &wire.SettledBatch{Incarnation: inc, Runs: settledRuns(batch, &d.runOrder)})
		}
	}
	d.reportCountsEvery(ctx)
}

// countsReportEvery is the shortest time between two SettlementCounts: during a catch-up a
// report per SettledBatch would wake the supervisor once per change-stream batch for its status
// alone. Counts that come sooner wait for the flush tick (SettleFlushInterval), so a status is
// at most countsReportEvery + SettleFlushInterval old; on stop and drain they go at once.
const countsReportEvery = 100 * time.Millisecond

// reportCountsEvery reports the counts, or, within countsReportEvery of the last report, marks
// them due for the flush tick. With SettleBatch 1 (no flush tick) it reports every time.
func (d *dispatcher) reportCountsEvery(ctx actor.Context) {
	now := d.cfg.Clock.Now()
	if urgent := !d.settle.holds() || d.ended || d.draining; urgent || d.countsGate.Pass(now, countsReportEvery) {
		d.countsGate.Mark(now)
		d.countsDue = false
		d.reportCounts(ctx)
		return
	}
	d.countsDue = true
	d.armFlush()
}

// reportCounts sends the parent supervisor what settled since the last report, so that its
// status carries the totals across dispatcher restarts (increments add up; absolute counts of
// a restarted instance would not).
func (d *dispatcher) reportCounts(ctx actor.Context) {
	p := ctx.Parent()
	c, r := d.counts, d.reported
	if p == nil || (c.Settled == r.Settled && !d.readThrough.After(d.readReported)) {
		return
	}
	d.reported = c
	m := &messages.SettlementCounts{Settled: c.Settled - r.Settled, Handled: c.Handled - r.Handled,
		Filtered: c.Filtered - r.Filtered, Unhandled: c.Unhandled - r.Unhandled, Skipped: c.Skipped - r.Skipped,
		DeadLettered: c.DeadLettered - r.DeadLettered, Dropped: c.Dropped - r.Dropped, InFlight: uint64(d.inFlight)}
	if !d.readThrough.IsZero() {
		m.ReadThrough = timestamppb.New(d.readThrough)
		d.readReported = d.readThrough
	}
	ctx.Send(p, m)
}

// replenish grants the current incarnation the free capacity once it is worth a message (a
// quarter of the capacity, or everything when nothing is in flight), within the settle limit.
func (d *dispatcher) replenish(ctx actor.Context) {
	if d.paused || d.draining || d.drained || d.stream == nil {
		return
	}
	free := d.cfg.Capacity - d.inFlight - d.credit
	if free <= 0 {
		return
	}
	if free < max(d.cfg.Capacity/4, 1) && d.inFlight > 0 {
		return
	}
	// A binding limit only grows with a FlowControl, so granting what it allows at once costs
	// one Demand per FlowControl at most.
	if free = min(free, d.limitFree()); free <= 0 {
		return
	}
	d.credit += free
	ctx.Send(d.stream, &wire.Demand{Incarnation: d.incarnation, Credit: uint32(free)})
}

func (d *dispatcher) onFlowControl(ctx actor.Context, m *wire.FlowControl) {
	if m.SettleLimit != nil {
		if m.GetAttach() != d.attachID {
			d.log.Debug("FlowControl of an earlier attach dropped", zap.Uint64("attach", m.GetAttach()),
				zap.Uint64("current", d.attachID))
			return
		}
		if !d.limited || m.GetSettleLimit() > d.limit {
			d.limit = m.GetSettleLimit()
		}
		d.limited, d.awaitingLimit = true, false
	}
	if m.Paused != d.paused {
		d.paused = m.Paused
		if d.paused {
			d.log.Warn("checkpointer paused the flow: no more credit until it catches up",
				zap.Int("inFlight", d.inFlight), zap.Int("credit", d.credit))
			return
		}
		d.log.Info("checkpointer resumed the flow")
	}
	d.replenish(ctx)
}

// onDrain stops accepting batches and answers Drained once every accepted event settled.
func (d *dispatcher) onDrain(ctx actor.Context, m *wire.Drain) {
	if d.drained {
		ctx.Respond(&wire.Drained{Settled: d.counts.Settled, Unsettled: uint64(d.inFlight)})
		return
	}
	d.drainTo = ctx.Sender()
	if d.draining {
		return
	}
	d.draining = true
	d.log.Info("draining", zap.Int("inFlight", d.inFlight), zap.Int("snapshotInFlight", d.snapInFlight))
	if d.inFlight == 0 && d.snapInFlight == 0 {
		d.finishDrain(ctx, false)
		return
	}
	timeout := d.cfg.DrainTimeout
	if m.TimeoutMs > 0 {
		timeout = time.Duration(m.TimeoutMs) * time.Millisecond
	}
	d.drainGen = generations.Add(1)
	gen, self, root := d.drainGen, d.self, d.sys.Root
	d.drainTimer = d.cfg.Clock.AfterFunc(timeout, func() {
		root.Send(self, &wire.DrainDeadline{Generation: gen})
	})
}

func (d *dispatcher) finishDrain(ctx actor.Context, timedOut bool) {
	treekit.StopTimer(&d.drainTimer)
	d.flushAll(ctx)
	d.draining, d.drained = false, true
	reply := &wire.Drained{Settled: d.counts.Settled, Unsettled: uint64(d.inFlight), TimedOut: timedOut}
	d.log.Info("drained", zap.Uint64("settled", reply.Settled), zap.Uint64("unsettled", reply.Unsettled),
		zap.Bool("timedOut", timedOut))
	if d.drainTo != nil {
		ctx.Send(d.drainTo, reply)
	}
}

// stopLanes cancels the lanes and waits for them (bounded by StopTimeout), then takes their
// last settlements. Events still queued or interrupted stay unsettled.
func (d *dispatcher) stopLanes(ctx actor.Context) {
	if d.ended || d.cancel == nil {
		return
	}
	d.ended = true
	d.cancel()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	timeout := make(chan struct{})
	t := d.cfg.Clock.AfterFunc(d.cfg.StopTimeout, func() { close(timeout) })
	select {
	case <-done:
		t.Stop()
	case <-timeout:
		d.log.Error("lanes did not stop within StopTimeout: a handler ignores its context",
			zap.Duration("stopTimeout", d.cfg.StopTimeout))
	}
	// Count what the lanes settled before they ended; do not replenish or release anything.
	taken, _ := d.settle.take(d.spare)
	d.pending = append(d.pending, d.absorb(ctx, taken)...)
	clear(taken)
	d.spare = taken[:0]
}

// shutdown ends the lanes and sends what settled, on Stopping and Restarting.
func (d *dispatcher) shutdown(ctx actor.Context, why string) {
	treekit.StopTimer(&d.flushTimer)
	d.stopLanes(ctx)
	if d.draining {
		d.finishDrain(ctx, true)
	} else {
		d.flushAll(ctx)
	}
	d.log.Debug("dispatcher "+why, zap.Int("unsettled", d.inFlight))
}

func (d *dispatcher) snapshot() *wire.DispatcherStats {
	s := &wire.DispatcherStats{
		Incarnation:  d.incarnation,
		Capacity:     d.stats.Capacity,
		InFlight:     uint32(d.inFlight),
		Credit:       uint32(d.credit),
		Paused:       d.paused,
		Draining:     d.draining,
		Lanes:        d.stats.Lanes,
		Accepted:     d.stats.Accepted,
		Settled:      d.counts.Settled,
		Handled:      d.counts.Handled,
		Filtered:     d.counts.Filtered,
		Unhandled:    d.counts.Unhandled,
		Skipped:      d.counts.Skipped,
		DeadLettered: d.counts.DeadLettered,
		Dropped:      d.counts.Dropped,
		StaleBatches: d.stats.StaleBatches,
	}
	return s
}

// keptCap is the largest capacity (in elements) a buffer keeps once the dispatcher holds no
// event: a burst grows the buffers to the dispatcher's capacity, and an idle stream should not
// keep them at that size.
const keptCap = 256

// shrink drops the buffers a burst grew (nothing is in flight, the stream idles): the next
// burst grows them again, a few allocations per burst.
func (d *dispatcher) shrink() {
	for i, s := range d.stage {
		if cap(s) > keptCap {
			d.stage[i] = nil
		}
	}
	if cap(d.pending) > keptCap {
		d.pending = nil
	}
	if cap(d.spare) > keptCap {
		d.spare = nil
	}
	if cap(d.held) > keptCap && len(d.held) == 0 {
		d.held = nil
	}
}
