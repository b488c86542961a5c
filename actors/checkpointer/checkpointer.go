package checkpointer

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// instances numbers checkpointer instances process-wide, so that a result or a timer tick of an
// old instance (before a restart) is recognised and dropped by the new one.
var instances atomic.Uint64

// shared is the state of one Props shared by all its instances (a restarted checkpointer is a
// new instance): whether the tree's first start (StartPosition Latest/At) has been applied.
type shared struct {
	firstDone atomic.Bool
}

// New validates cfg and returns the props of the checkpointer actor. Spawn it once per stream
// tree (the supervisor spawns it as a sibling of the stream actor). A restart of the actor
// builds a fresh instance: its in-memory position is lost and the next ResolveStart loads the
// stored checkpoint; StartPosition Latest/At is not applied again once a start succeeded.
func New(cfg Config) (*actor.Props, error) {
	sh := &shared{}
	return treekit.New(cfg, Config.validate, func(c Config) Config { return c.withDefaults().boundIO() },
		func(c *Config) actor.Actor { return newCheckpointer(c, sh) })
}

// Internal messages: results of the worker goroutine and timer ticks. They never leave the
// actor (they are sent to itself by the goroutine and the timers it owns) and carry Go errors,
// so they are plain Go values, not protobuf. inst stamps the instance; stale ones are dropped.
type (
	// resolveResult ends a resolve or history-lost job.
	resolveResult struct {
		inst, req uint64
		pos       *position         // the position to start from (nil on failure)
		source    string            // StartFrom.source
		cp        *store.Checkpoint // the checkpoint written or loaded, when pos is durable
		written   bool              // cp was written by this job (else loaded)
		applied   bool              // StartPosition Latest/At was applied
		discarded *store.Checkpoint // a saved checkpoint that Latest/At ignored
		migrated  *store.Checkpoint // the shared checkpoint taken as this instance's starting point
		// ignoredShared is a shared checkpoint older than Checkpoint.Retention, not migrated.
		ignoredShared *store.Checkpoint
		gap           *store.Gap      // a gap recorded by this job
		fail          string          // non-empty: the start failed (transient)
		failErr       error           // the error behind fail, when there is one
		persist       error           // the position could not be persisted (history lost paths)
		fenced        error           // a write was fenced
		snapshot      string          // a snapshot must run before streaming from pos
		newSnap       *store.Snapshot // the snapshot record this job created
	}
	// saveResult ends a checkpoint save.
	saveResult struct {
		inst, gen uint64
		cp        store.Checkpoint
		pos       position
		version   uint64 // tracker version of the position written
		settled   uint64 // settledTotal when the save was issued
		recv      uint64 // recvTotal when the save was issued
		lwm       uint64
		err       error
	}
	// tick is a timer firing.
	tick struct {
		inst, gen uint64
		kind      tickKind
	}
)

type tickKind uint8

const (
	tickInterval tickKind = iota
	tickRetry
	tickReport  // a CheckpointWritten held back by reportWrite is due
	tickSettled // a SettledThrough held back by reportSettled is due
)

type pendingStart struct {
	req uint64
	inc uint64
	to  *actor.PID
}

type flushWaiter struct {
	to      *actor.PID
	version uint64 // the write must cover this tracker version
}

type checkpointer struct {
	cfg  *Config // shared by every instance (the props keep one copy); never written
	sh   *shared
	log  *zap.Logger
	inst uint64

	self *actor.PID
	sys  *actor.ActorSystem
	w    *worker

	t           *tracker
	incarnation uint64
	lastStart   position // the position of the latest StartFrom (what a HistoryLost is about)
	reqSeq      uint64
	resolving   *pendingStart
	snapPending string // the id of the snapshot that runs before the stream streams; "" when none
	stale       uint64 // stale messages and results dropped

	// Persistence. settledTotal counts every settlement; writtenSettled is settledTotal at the
	// snapshot of the last successful write; coveredSettled that of the last write issued (in
	// flight or succeeded; the SaveEvery count runs from it); flushedSettled that of the last
	// successful write or of the last time the durable position was the current one (the
	// MaxUnflushed count runs from it).
	persisted        position
	persistedVersion uint64
	settledTotal     uint64
	writtenSettled   uint64
	coveredSettled   uint64
	flushedSettled   uint64
	saving           bool
	saveGen          uint64
	timerGen         uint64
	intervalTimer    clock.Timer
	intervalDue      bool
	intervalIdle     bool // the armed interval timer waits Checkpoint.IdleInterval (only the PBRT moved)
	retryTimer       clock.Timer
	failures         int
	refusals         int // writes the store refused as behind its position (store.ErrBackward)
	waiters          []flushWaiter

	// Settle limit (FlowControl.settle_limit). It is counted in Settled entries received, every
	// entry of every SettledBatch whatever its incarnation (what the dispatcher counts), as
	// settledTotal skips duplicates and stale incarnations. recvTotal counts them over the
	// instance's life; recvAtAttach is recvTotal at the latest AttachDispatcher (the dispatcher
	// counts from there); recvFlushed is recvTotal where flushedSettled was last set. The limit
	// is recvFlushed + MaxUnflushed − recvAtAttach.
	recvTotal    uint64
	recvAtAttach uint64
	recvFlushed  uint64
	attach       uint64 // AttachDispatcher.attach of the latest attach, echoed in FlowControl
	flowSent     bool   // a FlowControl was sent to the current dispatcher
	limitSent    uint64 // the settle_limit sent last
	pausedSent   bool   // the paused flag sent last

	// Reports to the supervisor (reportWrite): reportGate spaces the CheckpointWritten;
	// unreported is a later write's report held back until reportTimer.
	reportGate  treekit.Gate
	unreported  *messages.CheckpointWritten
	reportTimer clock.Timer

	// Settled-through reports to the supervisor (settled.go): the cluster time last sent (packed
	// seconds<<32|increment), the tracker version it was computed at, the gate spacing them and
	// the timer of a held-back one.
	settledSent    uint64
	settledVersion uint64
	settledGate    treekit.Gate
	settledTimer   clock.Timer

	paused     bool // the settle limit is reached while the store fails
	dispatcher *actor.PID
	fenced     bool
}

func newCheckpointer(cfg *Config, sh *shared) *checkpointer {
	return &checkpointer{cfg: cfg, sh: sh, log: cfg.Logger, inst: instances.Add(1), t: newTracker(),
		dispatcher: cfg.Dispatcher}
}

// Receive implements actor.Actor. After every message that moved the resume position, the
// supervisor hears of its cluster time (reportSettled).
func (c *checkpointer) Receive(ctx actor.Context) {
	c.receive(ctx)
	if c.t.version != c.settledVersion {
		c.reportSettled(ctx, false)
	}
}

func (c *checkpointer) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.self, c.sys = ctx.Self(), ctx.ActorSystem()
		c.w = newWorker(sender(c.sys, c.self))
	case *actor.Stopping:
		c.log.Debug("checkpointer stopping", zap.Uint64("lwm", c.t.lwm), zap.Int("unflushed", c.unflushed()),
			zap.Uint64("stale_dropped", c.stale))
		c.shutdown(ctx, "checkpointer stopping")
	case *actor.Restarting:
		c.shutdown(ctx, "checkpointer restarting")
	case *wire.ResolveStart:
		c.onResolveStart(ctx, m)
	case *wire.HistoryLost:
		c.onHistoryLost(ctx, m)
	case *wire.Progress:
		c.onProgress(m)
	case *wire.SettledBatch:
		c.onSettled(ctx, m)
	case *wire.Flush:
		c.onFlush(ctx)
	case *wire.AdvanceHandoff:
		c.onAdvanceHandoff(ctx, m)
	case *wire.AttachDispatcher:
		if m.GetId() == "" {
			c.log.Warn("AttachDispatcher without an id ignored")
			return
		}
		c.dispatcher = actor.NewPID(m.GetAddress(), m.GetId())
		// Every SettledBatch the dispatcher sent before has arrived (one sender, FIFO): its count
		// of settlements starts again here.
		c.recvAtAttach, c.attach = c.recvTotal, m.GetAttach()
		c.log.Debug("dispatcher attached", zap.String("pid", c.dispatcher.String()),
			zap.Uint64("settle_limit", c.settleLimit()))
		c.flow(ctx, true)
	case *resolveResult:
		if m.inst != c.inst {
			c.stale++
			return
		}
		c.onResolveResult(ctx, m)
	case *saveResult:
		if m.inst != c.inst || m.gen != c.saveGen || !c.saving {
			c.stale++
			return
		}
		c.onSaveResult(ctx, m)
	case *tick:
		if m.inst != c.inst || m.gen != c.timerGen {
			c.stale++
			return
		}
		c.onTick(ctx, m)
	}
}

// shutdown ends the worker goroutine and the timers, and answers pending requests.
func (c *checkpointer) shutdown(ctx actor.Context, why string) {
	if c.w != nil {
		c.w.stop()
	}
	c.stopTimers()
	c.sendReport(ctx) // a held-back report goes now, or the status would keep an older write
	c.reportSettled(ctx, true)
	for _, w := range c.waiters {
		c.sendFlushed(ctx, w.to, errors.New(why))
	}
	c.waiters = nil
	if p := c.resolving; p != nil {
		c.resolving = nil
		ctx.Send(p.to, &wire.StartFrom{Incarnation: p.inc, Kind: messages.StartKind_START_KIND_FAIL,
			Reason: why})
	}
}

func (c *checkpointer) stopTimers() {
	c.timerGen++
	treekit.StopTimer(&c.intervalTimer)
	treekit.StopTimer(&c.retryTimer)
	treekit.StopTimer(&c.reportTimer)
	treekit.StopTimer(&c.settledTimer)
	c.intervalDue = false
}

// after arms a timer that sends a tick of kind to the actor.
func (c *checkpointer) after(kind tickKind) clock.Timer {
	var d = c.cfg.Checkpoint.SaveInterval
	if kind == tickInterval && c.intervalIdle {
		d = c.cfg.Checkpoint.IdleInterval
	}
	if kind == tickRetry {
		d = c.cfg.retryDelay(c.failures)
	}
	if kind == tickReport {
		d = writeReportEvery
	}
	if kind == tickSettled {
		d = settledReportEvery
	}
	msg := &tick{inst: c.inst, gen: c.timerGen, kind: kind}
	send := sender(c.sys, c.self)
	return c.cfg.Clock.AfterFunc(d, func() { send(msg) })
}

func (c *checkpointer) onTick(ctx actor.Context, m *tick) {
	switch m.kind {
	case tickInterval:
		if c.intervalTimer == nil {
			return
		}
		c.intervalTimer = nil
		c.intervalDue = true
		if c.intervalIdle {
			c.t.compact() // nothing settled for IdleInterval: the stream is idle
		}
		c.maybeSave(ctx, false)
	case tickRetry:
		if c.retryTimer == nil {
			return
		}
		c.retryTimer = nil
		c.maybeSave(ctx, true)
	case tickReport:
		if c.reportTimer == nil {
			return
		}
		c.reportTimer = nil
		c.sendReport(ctx)
	case tickSettled:
		if c.settledTimer == nil {
			return
		}
		c.settledTimer = nil
		c.reportSettled(ctx, true)
	}
}

// meta is the Meta of an event the checkpointer reports now.
func (c *checkpointer) meta() observe.Meta {
	return observe.Meta{Stream: c.cfg.Stream, Time: c.cfg.Clock.Now()}
}

// report hands ev to the Observer, recovering (and logging) a panic: it never breaks the
// checkpointer.
func (c *checkpointer) report(ev observe.Event) {
	treekit.Report(c.cfg.Observer, c.log, "checkpointer", ev)
}

// writeReportEvery is the shortest time between two CheckpointWritten reports to the
// supervisor: a catch-up writes every SaveEvery settlements, about once per change-stream
// batch, and a report per write would wake the supervisor as often for its status alone. A write
// within it of the last report is reported when it has passed (or at once when a Flush waits
// for the write, and on stop), so the status is at most this much behind the store.
const writeReportEvery = 100 * time.Millisecond

// reportWrite tells the parent supervisor about a successful write, for its status: at once
// when now (a Flush waits for it, a start position) or writeReportEvery has passed since the
// last report, else when it has.
func (c *checkpointer) reportWrite(ctx actor.Context, cp store.Checkpoint, now bool) {
	if ctx.Parent() == nil {
		return
	}
	c.unreported = &messages.CheckpointWritten{Token: cp.Token, Source: cp.Source, WrittenAt: timestamppb.New(cp.UpdatedAt)}
	if now || c.reportGate.Pass(c.cfg.Clock.Now(), writeReportEvery) {
		c.sendReport(ctx)
		return
	}
	if c.reportTimer == nil {
		c.reportTimer = c.after(tickReport)
	}
}

// sendReport sends the report reportWrite held back, if any.
func (c *checkpointer) sendReport(ctx actor.Context) {
	treekit.StopTimer(&c.reportTimer)
	m := c.unreported
	p := ctx.Parent()
	if m == nil || p == nil {
		return
	}
	c.unreported = nil
	c.reportGate.Mark(c.cfg.Clock.Now())
	ctx.Send(p, m)
}

// fence stops everything after a fenced write and escalates a terminal failure.
func (c *checkpointer) fence(ctx actor.Context, err error) {
	if c.fenced {
		return
	}
	c.fenced = true
	if c.w != nil {
		c.w.stop()
	}
	c.stopTimers()
	terr := fencedError(c.cfg.Stream, err)
	// The user hears of it as the supervisor's terminal Stopped{Crashed} (ErrFenced) and the
	// leader actor's LeadershipChanged{fenced}.
	c.log.Error("checkpoint write fenced; the checkpointer stops", zap.Error(err))
	for _, w := range c.waiters {
		ctx.Send(w.to, &wire.Flushed{Fenced: true, Error: terr.Error(), LowWaterMark: c.t.lwm})
	}
	c.waiters = nil
	if p := c.resolving; p != nil {
		c.resolving = nil
		ctx.Send(p.to, &wire.StartFrom{Incarnation: p.inc, Kind: messages.StartKind_START_KIND_FAIL,
			Terminal: true, Reason: terr.Error()})
	}
	streamtree.Fail(ctx, terr)
}

// isInvalidate reports whether a settlement is an invalidate event (flagged by the stream
// actor on the Event and copied by the dispatcher).
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
