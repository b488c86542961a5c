package stream

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/logx"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// unsupervised numbers the incarnations of stream actors that do not run under a stream
// supervisor (streamtree.Incarnation is 0 for them). It is process-wide and only grows, so a new
// instance always has a higher incarnation than the previous one, as the checkpointer and the
// dispatcher require.
var unsupervised atomic.Uint64

// streamActor is one instance (incarnation) of the stream actor. protoactor builds a fresh one on
// every restart; the reader goroutine of an instance is cancelled on Restarting and Stopping.
type streamActor struct {
	cfg *Config // shared by every instance (the props keep one copy); never written
	log *zap.Logger

	inc          uint64
	self         *actor.PID
	checkpointer *actor.PID
	dispatcher   *actor.PID
	snapshot     *actor.PID

	phase      wire.StreamPhase
	gen        uint64
	rd         *reader
	credit     *credit
	stats      counters
	subscribed bool
	// startedDue: the first cursor open of the incarnation is reported (observe.Started) when
	// the dispatcher's first Demand answers the Subscribe, not before. From then on the
	// dispatcher knows the incarnation and skips the previous ones' queued events, so every
	// handler call that starts after the report is this incarnation's or was already running.
	startedDue  bool
	opens       uint32
	invalidated uint32
	startKind   messages.StartKind
	startSource string
	nextSeq     uint64
	snapshotID  string // the snapshot this incarnation waits for (phase SNAPSHOTTING)
}

func newStreamActor(cfg *Config) *streamActor {
	return &streamActor{cfg: cfg, log: cfg.Logger, credit: newCredit()}
}

// Receive implements actor.Actor.
func (s *streamActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
	case *wire.StartFrom:
		s.onStartFrom(ctx, m)
	case *wire.ReaderOpened:
		s.onOpened(ctx, m)
	case *wire.Demand:
		if m.GetIncarnation() != s.inc {
			s.log.Debug("stale Demand dropped", zap.Uint64("incarnation", m.GetIncarnation()), zap.Uint64("current", s.inc))
			return
		}
		s.credit.add(uint64(m.GetCredit()))
		if s.startedDue {
			s.reportStarted()
		}
	case *wire.ReaderEnded:
		s.onEnded(ctx, m)
	case *wire.SnapshotFinished:
		s.onSnapshotFinished(ctx, m)
	case *wire.StreamStatsRequest:
		ctx.Respond(s.statsReply())
	case *actor.Restarting:
		s.stopReader("restarting")
		s.cancelSnapshot(ctx)
	case *actor.Stopping:
		s.stopReader("stopping")
		s.cancelSnapshot(ctx)
	}
}

func (s *streamActor) onStarted(ctx actor.Context) {
	s.self = ctx.Self()
	s.inc = streamtree.Incarnation(ctx)
	if s.inc == 0 {
		s.inc = unsupervised.Add(1)
	}
	s.checkpointer = s.sibling(ctx, s.cfg.CheckpointerPID, s.cfg.Checkpointer)
	s.dispatcher = s.sibling(ctx, s.cfg.DispatcherPID, s.cfg.Dispatcher)
	s.snapshot = s.sibling(ctx, s.cfg.SnapshotPID, s.cfg.Snapshot)
	s.log = logx.With(s.cfg.Logger, zap.Uint64("incarnation", s.inc))
	if s.checkpointer == nil || s.dispatcher == nil {
		// Without a parent and without PIDs there is nobody to talk to: a wiring bug.
		panic(&actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errStartFailed,
			Detail: "no checkpointer or dispatcher: the actor has no parent and Config.CheckpointerPID/DispatcherPID are nil"})
	}
	s.phase = wire.StreamPhase_STREAM_PHASE_RESOLVING
	s.log.Debug("resolving the start position")
	ctx.Request(s.checkpointer, &wire.ResolveStart{Incarnation: s.inc})
}

func (s *streamActor) sibling(ctx actor.Context, pid *actor.PID, name string) *actor.PID {
	if pid != nil {
		return pid
	}
	if p := ctx.Parent(); p != nil {
		return actor.NewPID(p.Address, p.Id+"/"+name)
	}
	return nil
}

// onStartFrom opens the cursor from the resolved position, or fails.
func (s *streamActor) onStartFrom(ctx actor.Context, m *wire.StartFrom) {
	if m.GetIncarnation() != s.inc {
		s.log.Debug("stale StartFrom dropped", zap.Uint64("for", m.GetIncarnation()))
		return
	}
	if s.phase != wire.StreamPhase_STREAM_PHASE_RESOLVING && s.phase != wire.StreamPhase_STREAM_PHASE_HISTORY_LOST {
		s.log.Warn("unexpected StartFrom dropped", zap.Stringer("phase", s.phase), zap.Stringer("kind", m.GetKind()))
		return
	}
	pos := Position{Kind: m.GetKind(), Token: bson.Raw(m.GetToken())}
	switch m.GetKind() {
	case messages.StartKind_START_KIND_FAIL:
		if m.GetTerminal() {
			// The checkpointer has escalated the terminal failure itself; failing here too could
			// race it and turn it into a transient restart. Wait to be stopped.
			s.phase = wire.StreamPhase_STREAM_PHASE_FAILED
			s.log.Error("start failed terminally; waiting for the supervisor to stop the stream", zap.String("reason", m.GetReason()))
			return
		}
		// The reason ends with the cause's text; the cause keeps the server's code for the
		// classifier (a pipeline the server refuses is terminal, a network error is not).
		cause := errdetail.Err(m.GetCause())
		detail := m.GetReason()
		if cause != nil {
			detail = strings.TrimSuffix(detail, ": "+cause.Error())
		}
		streamtree.Fail(ctx, &actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errStartFailed, Detail: detail, Cause: cause})
		return
	case messages.StartKind_START_KIND_RESUME_AFTER, messages.StartKind_START_KIND_START_AFTER:
		if len(pos.Token) == 0 {
			panic(&actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errStartFailed,
				Detail: fmt.Sprintf("StartFrom %v without a token", m.GetKind())})
		}
	case messages.StartKind_START_KIND_START_AT_OPERATION_TIME:
		ot := m.GetOperationTime()
		pos.OperationTime = bson.Timestamp{T: ot.GetSeconds(), I: ot.GetIncrement()}
	default:
		panic(&actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errStartFailed,
			Detail: fmt.Sprintf("StartFrom of unknown kind %v", m.GetKind())})
	}
	next := m.GetNextSeq()
	if next == 0 {
		next = 1
	}
	s.startKind, s.startSource = m.GetKind(), m.GetSource()
	if id := m.GetSnapshotId(); id != "" {
		// The position is a snapshot's handoff position: the snapshot runs to its end first,
		// then the position is resolved again (it may have moved forward meanwhile).
		if s.snapshot == nil {
			panic(&actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errStartFailed,
				Detail: "StartFrom names snapshot " + id + " but the actor has no parent and Config.SnapshotPID is nil"})
		}
		s.phase, s.snapshotID = wire.StreamPhase_STREAM_PHASE_SNAPSHOTTING, id
		s.log.Info("snapshot runs before the change stream opens", zap.String("snapshot", id))
		// The supervisor first: the position is fixed whatever the snapshot does next.
		if p := ctx.Parent(); p != nil {
			ctx.Send(p, &wire.Snapshotting{Incarnation: s.inc, SnapshotId: id})
		}
		ctx.Request(s.snapshot, &wire.RunSnapshot{Incarnation: s.inc, SnapshotId: id})
		return
	}
	s.launch(ctx, pos, next)
}

// onSnapshotFinished resolves the start again once the snapshot is done, or fails.
func (s *streamActor) onSnapshotFinished(ctx actor.Context, m *wire.SnapshotFinished) {
	if m.GetIncarnation() != s.inc || s.phase != wire.StreamPhase_STREAM_PHASE_SNAPSHOTTING || m.GetSnapshotId() != s.snapshotID {
		s.log.Debug("stale SnapshotFinished dropped", zap.Uint64("for", m.GetIncarnation()), zap.String("snapshot", m.GetSnapshotId()))
		return
	}
	id := s.snapshotID
	s.snapshotID = ""
	if m.GetTerminal() {
		// The snapshot actor escalated the terminal failure itself; failing here too could race
		// it into a transient restart. Wait to be stopped.
		s.phase = wire.StreamPhase_STREAM_PHASE_FAILED
		s.log.Error("snapshot failed terminally; waiting for the supervisor to stop the stream", zap.String("error", m.GetError()))
		return
	}
	if m.GetError() != "" {
		cause := errdetail.Err(m.GetCause())
		if cause == nil {
			cause = errors.New(m.GetError())
		}
		streamtree.Fail(ctx, &actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errStartFailed,
			Detail: "snapshot " + id + " failed", Cause: cause})
		return
	}
	s.phase = wire.StreamPhase_STREAM_PHASE_RESOLVING
	ctx.Request(s.checkpointer, &wire.ResolveStart{Incarnation: s.inc, SnapshotDone: id})
}

// cancelSnapshot stops the snapshot run of this incarnation, if one is awaited (its progress
// stays saved; the next incarnation resumes it).
func (s *streamActor) cancelSnapshot(ctx actor.Context) {
	if s.snapshotID != "" && s.snapshot != nil {
		ctx.Send(s.snapshot, &wire.CancelSnapshot{Incarnation: s.inc})
		s.snapshotID = ""
	}
}

// launch starts a new reader generation.
func (s *streamActor) launch(ctx actor.Context, pos Position, next uint64) {
	pos.MaxAwaitTime = s.cfg.MaxAwaitTime
	pos.Comment = commentPrefix + s.cfg.Stream
	s.gen++
	s.nextSeq = next
	s.stats.next.Store(next)
	s.phase = wire.StreamPhase_STREAM_PHASE_OPENING
	s.rd = &reader{cfg: s.cfg, log: logx.With(s.log, zap.Uint64("generation", s.gen)), root: ctx.ActorSystem().Root,
		self: s.self, dispatcher: s.dispatcher, inc: s.inc, gen: s.gen, pos: pos, seq: next,
		credit: s.credit, stats: &s.stats}
	s.log.Debug("opening the change stream", zap.Stringer("kind", pos.Kind), zap.Uint64("next_seq", next),
		zap.Uint64("generation", s.gen))
	s.rd.start()
}

func (s *streamActor) current(inc, gen uint64) bool {
	return inc == s.inc && s.rd != nil && gen == s.gen
}

// onOpened reports the cursor open: the supervisor resets its attempt counter, and the first
// open of the instance subscribes to the dispatcher (its Demand starts the reading).
func (s *streamActor) onOpened(ctx actor.Context, m *wire.ReaderOpened) {
	if !s.current(m.GetIncarnation(), m.GetGeneration()) {
		return
	}
	s.phase = wire.StreamPhase_STREAM_PHASE_STREAMING
	s.opens++
	reopen := s.opens > 1
	kind := s.rd.openedKind()
	s.log.Info("change stream open", zap.Stringer("kind", kind), zap.String("source", s.startSource),
		zap.Uint64("next_seq", s.nextSeq), zap.Bool("reopen", reopen))
	streamtree.NotifyResubscribed(ctx)
	if !s.subscribed {
		s.subscribed, s.startedDue = true, true
		ctx.Request(s.dispatcher, &wire.Subscribe{Incarnation: s.inc})
		return
	}
	s.reportStarted()
}

// reportStarted reports a cursor open: at once for a reopen, on the Subscribe's answer for the
// first open of the incarnation (startedDue).
func (s *streamActor) reportStarted() {
	s.startedDue = false
	s.report(observe.Started{Meta: s.meta(), Position: startedPosition(s.startSource)})
}

// startedPosition maps the source of the position a cursor opened at (StartFrom.source, or
// "invalidate" for a reopen after an invalidate) to observe.Started.Position: a stored
// checkpoint or the checkpointer's in-memory position is "checkpoint".
func startedPosition(source string) string {
	switch source {
	case store.SourceInitial:
		return "initial"
	case store.SourceResumeFromNow, store.SourceRebuild:
		return "after-gap"
	case "latest":
		return "latest"
	case "at":
		return "at"
	case "invalidate":
		return "after-invalidate"
	case store.SourceMigrated:
		return "migrated"
	}
	return "checkpoint"
}

// onEnded handles the end of the reader goroutine.
func (s *streamActor) onEnded(ctx actor.Context, m *wire.ReaderEnded) {
	if !s.current(m.GetIncarnation(), m.GetGeneration()) {
		return
	}
	s.rd = nil
	s.nextSeq = m.GetNextSeq()
	switch m.GetEnd() {
	case wire.ReaderEnd_READER_END_HISTORY_LOST:
		s.phase = wire.StreamPhase_STREAM_PHASE_HISTORY_LOST
		s.log.Warn("start position lost from the oplog; asking the checkpointer", zap.Int32("code", m.GetCode()),
			zap.String("error", m.GetError()))
		ctx.Request(s.checkpointer, &wire.HistoryLost{Incarnation: s.inc, Code: m.GetCode(), Message: m.GetError()})
	case wire.ReaderEnd_READER_END_INVALIDATED:
		s.onInvalidated(ctx, m)
	default:
		cause := errdetail.Err(m.GetCause())
		switch {
		case m.GetEnd() == wire.ReaderEnd_READER_END_CURSOR_CLOSED:
			cause = errCursorClosed
		case cause == nil:
			cause = errors.New(m.GetError())
		}
		open := m.GetEnd() == wire.ReaderEnd_READER_END_OPEN_FAILED
		detail := "cursor died"
		if open {
			detail = "opening the change stream failed"
		}
		err := &actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: errCursor, Cause: cause, Detail: detail}
		// The supervisor classifies the failure and logs what follows (a restart, or the terminal
		// crash): a line here claiming either would be wrong half the time.
		s.log.Debug("change stream failed; reported to the supervisor", zap.Error(err), zap.Int32("code", m.GetCode()))
		streamtree.Fail(ctx, err)
	}
}

// onInvalidated follows an invalidate event, which the reader already delivered as the last
// event of its batch: reopen with startAfter its token, or fail terminally.
func (s *streamActor) onInvalidated(ctx actor.Context, m *wire.ReaderEnded) {
	s.invalidated++
	tok := bson.Raw(m.GetInvalidateToken())
	restart := s.cfg.InvalidateRestart && len(tok) > 0
	seq := m.GetNextSeq() - 1 // the invalidate event's seq
	action := policy.InvalidateStop
	if restart {
		action = policy.InvalidateRestart
	}
	s.report(observe.Invalidated{Meta: s.meta(), Cause: m.GetInvalidateCause(), Action: action.String()})
	if restart {
		s.log.Info("change stream invalidated; reopening after the invalidate (startAfter)", zap.Uint64("seq", seq))
		s.startSource = "invalidate"
		s.launch(ctx, Position{Kind: messages.StartKind_START_KIND_START_AFTER, Token: tok}, m.GetNextSeq())
		return
	}
	err := &actorError{Stream: s.cfg.Stream, Incarnation: s.inc, Sentinel: streamtree.ErrInvalidated,
		Detail: fmt.Sprintf("invalidate event delivered as seq %d; InvalidateRestart is false", seq)}
	s.log.Error("change stream invalidated; the stream stops (terminal)", zap.Error(err))
	streamtree.Fail(ctx, err)
}

func (s *streamActor) stopReader(why string) {
	if s.rd != nil {
		s.log.Debug("cancelling the reader", zap.String("why", why))
		s.rd.stop()
		s.rd = nil
	}
}

func (s *streamActor) statsReply() *wire.StreamStats {
	st := &wire.StreamStats{
		Stream: s.cfg.Stream, Incarnation: s.inc, Phase: s.phase, Credit: s.credit.get(),
		Events: s.stats.events.Load(), Batches: s.stats.batches.Load(), PbrtBatches: s.stats.pbrtBatches.Load(),
		Opens: s.opens, Invalidations: s.invalidated, LastPbrt: s.stats.pbrt(), StartKind: s.startKind,
		StartSource: s.startSource, NextSeq: s.stats.next.Load(),
	}
	return st
}

// meta is the Meta of an event the actor reports now.
func (s *streamActor) meta() observe.Meta {
	return observe.Meta{Stream: s.cfg.Stream, Time: s.cfg.Clock.Now()}
}

// report hands ev to the Observer, recovering a panic: it never breaks the actor.
func (s *streamActor) report(ev observe.Event) {
	treekit.Report(s.cfg.Observer, s.log, "stream", ev)
}
