package supervisor

import (
	"errors"
	"fmt"
	"github.com/watchtree/watchtree/internal/policyx"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

// supervisorActor is the per-stream supervisor actor. It is its own actor.SupervisorStrategy: protoactor
// calls HandleFailure on the supervisor's mailbox goroutine, so the attempt counter, the restart
// timer and the epochs are plain fields, touched by one goroutine only.
//
// A death of the stream actor (a panic, an EscalateFailure, or the actor stopping by itself) is
// classified; a terminal cause, or a death once MaxAttempts restarts have been used, gives up at
// once (crashed, the stream actor is stopped). Otherwise the attempt counter grows by one, a
// restart is scheduled on the injected clock after the policy delay and the stream is in backoff;
// the failed actor stays suspended (messages sent to it queue) until the timer's RestartTick
// restarts it in place, keeping its PID. Nothing ever sleeps, so a stream in backoff never delays
// another stream's supervisor.
//
// Every timer and operator command bumps an epoch; a RestartTick of an older epoch is dropped, so
// an operator Stop or Start cancels a pending restart even if its timer already fired.
type supervisorActor struct {
	cfg  *Config // shared by every instance (the props keep one copy); never written
	log  *zap.Logger
	self *actor.PID
	root *actor.RootContext
	sup  actor.Supervisor

	state messages.SupervisorState
	why   string
	since time.Time

	attempt     int
	epoch       uint64
	timer       clock.Timer
	nextRetryAt time.Time
	lastDelay   time.Duration
	lastCause   error

	child         *actor.PID
	childQ        *incarnations
	inc           uint64
	dying         bool // a Stop was sent to child; its Terminated has not arrived
	launchPending bool // spawn a new child once the dying one is gone

	// The live siblings, a slice (two to four) rather than a map by PID: a map's buckets were
	// ~0.3 KB of every idle tree. siblingsDown and failures are made by their first entry.
	siblings     []liveSibling
	siblingsDown map[string]*actor.PID // failed siblings, suspended until the next launch
	stopping     bool                  // the supervisor itself is stopping: its children stop too

	failSeq  uint64
	failures map[uint64]failure

	stop              *stopRun // the graceful stop under way, if any
	stopGen           uint64
	restartDispatcher bool // the dispatcher was drained by a stop: restart it on the next launch
	lastStop          *messages.StopReport
	awaiting          []*actor.PID     // AwaitRunning requesters, answered when starting/backoff ends
	caughtUp          []caughtUpWaiter // AwaitCaughtUp requesters (caughtup.go)
	// settledThrough is the checkpointer's settled position (SettledThrough), packed
	// seconds<<32|increment, and settledCT the same as reported; 0 and nil before a report.
	settledThrough uint64
	settledCT      *messages.ClusterTime
	// nsWarning is the latest NamespaceCheck's warning ("" once the collection exists, or once
	// an event settled after it).
	nsWarning string

	settlements messages.SettlementCounts   // totals reported by the dispatcher
	inFlight    uint64                      // the dispatcher's latest report
	readThrough *timestamppb.Timestamp      // the dispatcher's latest report, nil before one
	checkpoint  *messages.CheckpointWritten // latest write reported by the checkpointer
	snapshot    *messages.SnapshotStatus    // latest progress reported by the snapshot actor
	onDemand    *messages.SnapshotStatus    // latest progress of an on-demand snapshot

	deaths, restarts, stale uint64
	transitions             [numStates]uint64 // by state: a map was ~0.2 KB of every tree
	life                    lifecycle         // the Observer's view of the transitions

	// SingleLeader (cfg.Leader set): the leader actor, its latest LeaseState, the epoch the
	// stream actor runs under, and whether the next launch starts a new leadership term (the
	// checkpointer and dispatcher then start afresh: another instance may have moved on).
	leader     *actor.PID
	lease      *messages.LeaseState
	leaseEpoch int64
	freshTerm  bool
	fencings   uint64
}

// failure is a HandleFailure waiting for its DeathNotice.
type failure struct {
	who    *actor.PID
	reason any
	inc    uint64
}

var _ actor.SupervisorStrategy = (*supervisorActor)(nil)

// instances numbers supervisor instances; each starts its epochs at instance<<32, so a restart
// tick left over from a previous instance (the supervisor restarted by its own parent) can never
// match a current epoch.
var instances atomic.Uint64

func newSupervisor(cfg *Config) *supervisorActor {
	return &supervisorActor{
		epoch: instances.Add(1) << 32,
		cfg:   cfg,
		log:   cfg.Logger,
	}
}

// liveSibling is a spawned sibling and its name.
type liveSibling struct {
	pid  *actor.PID
	name string
}

// siblingName returns the name of the live sibling with that PID id.
func (s *supervisorActor) siblingName(id string) (string, bool) {
	for _, sib := range s.siblings {
		if sib.pid.Id == id {
			return sib.name, true
		}
	}
	return "", false
}

// Receive handles lifecycle and control messages.
func (s *supervisorActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
	case *actor.Restarting:
		s.cancelTimer() // the next instance starts with its own epochs
	case *actor.Stopping:
		s.stopping = true
		s.abortStop()
		s.cancelTimer()
		if !stateDown(s.state) {
			s.transition(messages.SupervisorState_SUPERVISOR_STATE_STOPPED, "supervisor stopping", nil)
		}
	case *actor.Terminated:
		s.onTerminated(ctx, m.Who)
	case *wire.DeathNotice:
		s.onDeathNotice(ctx, m.GetSeq())
	case *wire.RestartTick:
		s.onRestartTick(ctx, m.GetEpoch())
	case *wire.Resubscribed:
		s.onResubscribed(m.GetIncarnation())
	case *wire.Snapshotting:
		s.onSnapshotting(m)
	case *messages.SnapshotStatus:
		if m.GetOnDemand() {
			s.onDemand = m
		} else {
			s.snapshot = m
		}
	case *messages.OnDemandSnapshot:
		s.onOnDemand(ctx, m)
	case *messages.Start:
		if !s.refuseWhileStopping("start", m.GetReason()) {
			s.onStart(ctx, m.GetReason())
		}
		s.respond(ctx)
	case *messages.Stop:
		if m.GetGraceful() || s.stop != nil {
			s.onGracefulStop(ctx, m)
			return
		}
		s.onStop(m.GetReason())
		s.respond(ctx)
	case *messages.Restart:
		if !s.refuseWhileStopping("restart", m.GetReason()) {
			s.onRestart(ctx, m.GetReason())
		}
		s.respond(ctx)
	case *messages.StatusRequest:
		s.respond(ctx)
	case *messages.AwaitRunning:
		s.onAwaitRunning(ctx)
	case *messages.AwaitCaughtUp:
		s.onAwaitCaughtUp(ctx, m)
	case *wire.SettledThrough:
		s.onSettledThrough(m)
	case *wire.NamespaceCheck:
		s.nsWarning = ""
		if m.GetMissing() {
			s.nsWarning = m.GetWarning()
		}
	case *wire.Drained:
		s.onDrained(ctx, m)
	case *wire.Flushed:
		s.onFlushed(ctx, m)
	case *stopDeadline:
		s.onStopDeadline(ctx, m)
	case *messages.SettlementCounts:
		s.addSettlements(m)
	case *messages.CheckpointWritten:
		s.checkpoint = m
	case *messages.LeaseState:
		s.onLeaseState(m)
	case *wire.LeaseGranted:
		s.onLeaseGranted(ctx, m)
	case *wire.LeaseLost:
		s.onLeaseLost(ctx, "lease lost: "+m.GetWhy())
	case *wire.HandOver:
		s.onHandOver(ctx, m)
	case *messages.ReleaseLease:
		s.onReleaseLease(ctx, m)
	case *wire.Fenced:
		s.onFencedReport(ctx, m)
	case *wire.Resigned:
		s.onResigned(ctx, m)
	}
}

// HandleFailure implements actor.SupervisorStrategy. It runs on the supervisor's goroutine as a
// system message, which overtakes user messages, so it only records the failure and posts a
// DeathNotice to itself: the death is then handled after any message the failed actor sent before
// dying (a Resubscribed right before a panic counts first, and the death still consumes an
// attempt).
func (s *supervisorActor) HandleFailure(_ *actor.ActorSystem, _ actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	var inc uint64
	switch r := reason.(type) {
	case *streamtree.PanicError:
		inc = r.Incarnation
	case *streamtree.Failure:
		inc = r.Incarnation
	default:
		if s.child != nil && child.Equal(s.child) {
			inc = s.inc
		}
	}
	s.failSeq++
	if s.failures == nil {
		s.failures = map[uint64]failure{}
	}
	s.failures[s.failSeq] = failure{who: child, reason: reason, inc: inc}
	s.root.Send(s.self, &wire.DeathNotice{Seq: s.failSeq})
}

func (s *supervisorActor) onStarted(ctx actor.Context) {
	s.self = ctx.Self()
	s.root = ctx.ActorSystem().Root
	sup, ok := ctx.(actor.Supervisor)
	if !ok {
		// protoactor's actorContext implements Supervisor; only a context decorator can hide it.
		panic(fmt.Sprintf("supervisor: context %T does not implement actor.Supervisor (no context decorators on supervisor props)", ctx))
	}
	s.sup = sup
	s.since = s.cfg.Clock.Now()
	s.spawnLeader(ctx)
	for _, sib := range s.cfg.Siblings {
		if !sib.Lazy {
			s.spawnSibling(ctx, sib)
		}
	}
	if s.cfg.StartStopped {
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STOPPED, "spawned stopped; waiting for an operator start", nil)
		return
	}
	if s.leader != nil {
		s.campaign("spawned")
		return
	}
	s.launch(ctx, "spawned")
}

// spawnSibling spawns sib under the supervisor (and its child middleware, see New; a sibling
// with NewProps gets its props made and wrapped here); nil when the spawn failed, which is
// logged.
func (s *supervisorActor) spawnSibling(ctx actor.Context, sib Sibling) *actor.PID {
	props := sib.Props
	if props == nil {
		p, err := sib.NewProps()
		if err != nil {
			s.log.Error("sibling props failed", zap.String("sibling", sib.Name), zap.Error(err))
			return nil
		}
		props = s.cfg.underMiddleware(p, nil)
	}
	pid, err := ctx.SpawnNamed(props, sib.Name)
	if err != nil {
		s.log.Error("sibling spawn failed", zap.String("sibling", sib.Name), zap.Error(err))
		return nil
	}
	s.siblings = append(s.siblings, liveSibling{pid: pid, name: sib.Name})
	return pid
}

// lazySibling returns the sibling called name, spawning it first when it is a Lazy one not
// spawned yet; nil when there is none.
func (s *supervisorActor) lazySibling(ctx actor.Context, name string) *actor.PID {
	if pid := s.siblingByName(name); pid != nil || name == "" {
		return pid
	}
	for _, sib := range s.cfg.Siblings {
		if sib.Lazy && sib.Name == name {
			return s.spawnSibling(ctx, sib)
		}
	}
	return nil
}

// launch (re)starts the stream actor as a new incarnation and enters starting.
func (s *supervisorActor) launch(ctx actor.Context, why string) {
	s.cancelTimer()
	s.abandonOnDemand(ctx, "the stream restarts ("+why+")")
	s.inc++
	for id, pid := range s.siblingsDown {
		s.sup.RestartChildren(pid)
		delete(s.siblingsDown, id)
	}
	if s.freshTerm {
		s.freshTerm = false
		s.restartDispatcher = true
		if pid := s.siblingByName(s.cfg.Checkpointer); pid != nil {
			s.sup.RestartChildren(pid)
		}
	}
	if s.restartDispatcher {
		s.restartDispatcher = false
		if pid := s.siblingByName(s.cfg.Dispatcher); pid != nil {
			s.sup.RestartChildren(pid)
		}
	}
	switch {
	case s.child != nil && !s.dying:
		s.childQ.push(s.inc)
		s.sup.RestartChildren(s.child)
	case s.dying:
		s.launchPending = true
	default:
		s.spawnChild(ctx)
	}
	s.transition(messages.SupervisorState_SUPERVISOR_STATE_STARTING, why, nil)
}

func (s *supervisorActor) spawnChild(ctx actor.Context) {
	q := &incarnations{}
	q.push(s.inc)
	props := s.cfg.underMiddleware(s.cfg.Child, q)
	pid, err := ctx.SpawnNamed(props, s.cfg.ChildName)
	if err != nil {
		// Only a name clash can get here; treat it as a death so the policy retries later.
		s.log.Error("stream actor spawn failed", zap.Error(err))
		s.death(fmt.Errorf("supervisor: spawn %s: %w", s.cfg.ChildName, err))
		return
	}
	s.child, s.childQ = pid, q
}

// stopChild stops the stream actor (if any) and forgets any pending launch.
func (s *supervisorActor) stopChild() {
	s.launchPending = false
	if pid := s.siblingByName(s.cfg.OnDemand); pid != nil {
		s.root.Send(pid, &wire.AbandonOnDemand{Why: "the stream stops"})
	}
	if s.child != nil && !s.dying {
		s.sup.StopChildren(s.child)
		s.dying = true
	}
}

func (s *supervisorActor) onTerminated(ctx actor.Context, who *actor.PID) {
	if s.child != nil && who.Equal(s.child) {
		s.child, s.childQ = nil, nil
		if s.dying {
			s.dying = false
			if s.launchPending {
				s.launchPending = false
				s.spawnChild(ctx)
			}
			if s.stop != nil && s.stop.phase == phaseStream {
				s.stopAdvance(ctx)
			}
			return
		}
		if stateUp(s.state) {
			s.death(streamtree.ErrChildStopped)
		}
		return
	}
	if name, ok := s.siblingName(who.Id); ok {
		if s.stopping {
			s.log.Debug("sibling stopped", zap.String("sibling", name)) // part of our own stop
		} else {
			s.log.Warn("sibling stopped", zap.String("sibling", name))
		}
		delete(s.siblingsDown, who.Id)
		for i, sib := range s.siblings {
			if sib.pid.Id == who.Id {
				s.siblings = append(s.siblings[:i], s.siblings[i+1:]...)
				break
			}
		}
	}
}

func (s *supervisorActor) onDeathNotice(ctx actor.Context, seq uint64) {
	f, ok := s.failures[seq]
	if !ok {
		return
	}
	delete(s.failures, seq)
	if s.leader != nil && f.who.Equal(s.leader) {
		s.onLeaderFailure(ctx, f)
		return
	}
	if name, ok := s.siblingName(f.who.Id); ok {
		s.onSiblingFailure(name, f)
		if s.stop != nil {
			s.onSiblingFailedWhileStopping(ctx, name)
		}
		return
	}
	if s.child == nil || !f.who.Equal(s.child) || s.dying || f.inc != s.inc ||
		!stateUp(s.state) {
		s.stale++
		s.log.Debug("stale failure dropped", zap.Uint64("incarnation", f.inc),
			zap.Uint64("current", s.inc), zap.String("state", stateName(s.state)), zap.Any("reason", f.reason))
		return
	}
	s.death(f.reason)
}

// onSiblingFailure keeps the failed sibling suspended until the next launch and, when the stream
// is up, stops the stream actor and handles the failure as a death: the tree resumes from the
// checkpointer's position once the policy delay has passed.
func (s *supervisorActor) onSiblingFailure(name string, f failure) {
	if s.siblingsDown == nil {
		s.siblingsDown = map[string]*actor.PID{}
	}
	s.siblingsDown[f.who.Id] = f.who
	s.log.Error("sibling failed", zap.String("sibling", name), zap.Error(streamtree.AsError(f.reason)))
	if !stateUp(s.state) {
		if s.state == messages.SupervisorState_SUPERVISOR_STATE_CRASHED || s.state == messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
			s.resumeFailedSiblings()
		}
		return
	}
	s.stopChild()
	s.death(&siblingError{name: name, reason: f.reason})
}

// siblingError is the reason of a death caused by a sibling's failure. It matches
// streamtree.ErrSiblingFailed and unwraps to the sibling's own cause, so a terminal sentinel raised by
// a sibling (e.g. history lost in the checkpointer) stays terminal.
type siblingError struct {
	name   string
	reason any
}

func (e *siblingError) Error() string {
	return fmt.Sprintf("%v %s: %v", streamtree.ErrSiblingFailed, e.name, streamtree.AsError(e.reason))
}

func (e *siblingError) Unwrap() []error {
	return []error{streamtree.ErrSiblingFailed, streamtree.AsError(e.reason)}
}

// death applies the RestartPolicy to one death of the stream actor.
func (s *supervisorActor) death(reason any) {
	if s.leader != nil && errors.Is(streamtree.AsError(reason), store.ErrFenced) {
		s.deaths++
		s.lastCause = streamtree.AsError(reason)
		s.fenced(s.lastCause)
		return
	}
	terminal, cause := s.classify(reason)
	s.deaths++
	s.lastCause = cause
	if terminal {
		s.giveUp("terminal error: "+cause.Error(), cause)
		return
	}
	s.attempt++
	maxA := s.cfg.Policy.MaxAttempts
	if maxA > 0 && s.attempt > maxA {
		s.giveUp(fmt.Sprintf("gave up after %d restart attempts: %v", maxA, cause), gaveUp(cause))
		return
	}
	delay := policyx.Delay(s.cfg.Policy, s.attempt, s.cfg.Rand)
	s.armTimer(delay)
	s.transition(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF, fmt.Sprintf("restart attempt %d/%s in %v after: %v",
		s.attempt, s.maxString(), delay, cause), cause)
}

func (s *supervisorActor) classify(reason any) (terminal bool, cause error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("classifier panicked; treating the failure as transient", zap.Any("panic", r))
			terminal, cause = false, streamtree.AsError(reason)
		}
	}()
	terminal, cause = s.cfg.Classify(reason)
	if cause == nil {
		cause = streamtree.AsError(reason)
	}
	return terminal, cause
}

// giveUp is terminal: the stream actor is stopped and the stream stays crashed until an operator
// Start. cause is the transition's: the latest death's, wrapped with streamtree.ErrGaveUp when the
// attempts ran out.
func (s *supervisorActor) giveUp(why string, cause error) {
	s.cancelTimer()
	s.stopChild()
	s.resignLease("gave up")
	s.resumeFailedSiblings()
	s.transition(messages.SupervisorState_SUPERVISOR_STATE_CRASHED, why, cause)
}

// resumeFailedSiblings lets failed siblings process messages again while the stream is down, so
// that a crashed tree still answers Drain, Flush and status requests (a failed child's mailbox
// stays suspended until its supervisor decides). They stay in siblingsDown: the next launch
// restarts them with fresh state.
func (s *supervisorActor) resumeFailedSiblings() {
	for _, pid := range s.siblingsDown {
		s.sup.ResumeChildren(pid)
	}
}

func (s *supervisorActor) armTimer(delay time.Duration) {
	s.cancelTimer()
	epoch := s.epoch
	root, self := s.root, s.self
	s.timer = s.cfg.Clock.AfterFunc(delay, func() { root.Send(self, &wire.RestartTick{Epoch: epoch}) })
	s.nextRetryAt = s.cfg.Clock.Now().Add(delay)
	s.lastDelay = delay
}

// cancelTimer stops the pending restart, if any, and bumps the epoch so that a tick already in
// the mailbox is dropped.
func (s *supervisorActor) cancelTimer() {
	treekit.StopTimer(&s.timer)
	s.epoch++
	s.nextRetryAt = time.Time{}
}

func (s *supervisorActor) onRestartTick(ctx actor.Context, epoch uint64) {
	if epoch != s.epoch || s.state != messages.SupervisorState_SUPERVISOR_STATE_BACKOFF {
		s.stale++
		s.log.Debug("stale restart tick dropped", zap.Uint64("epoch", epoch), zap.Uint64("current", s.epoch),
			zap.String("state", stateName(s.state)))
		return
	}
	s.timer = nil
	s.restarts++
	s.launch(ctx, fmt.Sprintf("restart attempt %d/%s after: %v", s.attempt, s.maxString(), s.lastCause))
}

// onSnapshotting moves a starting stream to snapshotting: its position is fixed, so whoever
// awaits running (Spawn) is answered. The attempt counter is not reset: only an open cursor
// proves the start healthy.
func (s *supervisorActor) onSnapshotting(m *wire.Snapshotting) {
	inc := m.GetIncarnation()
	if inc != s.inc || s.state != messages.SupervisorState_SUPERVISOR_STATE_STARTING || s.child == nil || s.dying {
		s.stale++
		s.log.Debug("stale snapshotting dropped", zap.Uint64("incarnation", inc),
			zap.Uint64("current", s.inc), zap.String("state", stateName(s.state)))
		return
	}
	s.transition(messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING, fmt.Sprintf("snapshot %s running before the cursor opens (incarnation %d)",
		m.GetSnapshotId(), inc), nil)
}

func (s *supervisorActor) onResubscribed(inc uint64) {
	if inc != s.inc || (s.state != messages.SupervisorState_SUPERVISOR_STATE_STARTING && s.state != messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING) || s.child == nil || s.dying {
		if inc != s.inc || s.state != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
			s.stale++
			s.log.Debug("stale resubscribed dropped", zap.Uint64("incarnation", inc),
				zap.Uint64("current", s.inc), zap.String("state", stateName(s.state)))
		}
		return
	}
	prev := s.attempt
	s.attempt = 0
	why := fmt.Sprintf("cursor open (incarnation %d)", inc)
	var cause error
	if prev > 0 {
		why += fmt.Sprintf(" after restart attempt %d: %v", prev, s.lastCause)
		cause = s.lastCause
	}
	s.transitionAttempt(messages.SupervisorState_SUPERVISOR_STATE_RUNNING, why, cause, prev)
}

func (s *supervisorActor) onStart(ctx actor.Context, reason string) {
	switch s.state {
	case messages.SupervisorState_SUPERVISOR_STATE_STARTING, messages.SupervisorState_SUPERVISOR_STATE_RUNNING, messages.SupervisorState_SUPERVISOR_STATE_STANDBY, messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING:
		s.log.Info("operator start ignored: already up", zap.String("state", stateName(s.state)), zap.String("reason", reason))
		return
	}
	s.attempt = 0
	if s.leader != nil && !s.leads() {
		s.campaign(operatorWhy("start", reason))
		return
	}
	s.launch(ctx, operatorWhy("start", reason))
}

func (s *supervisorActor) onStop(reason string) {
	if s.state == messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		return
	}
	s.cancelTimer()
	s.stopChild()
	s.resignLease(operatorWhy("stop", reason))
	s.transition(messages.SupervisorState_SUPERVISOR_STATE_STOPPED, operatorWhy("stop", reason), nil)
}

func (s *supervisorActor) onRestart(ctx actor.Context, reason string) {
	s.attempt = 0
	if s.leader != nil && !s.leads() {
		if s.state == messages.SupervisorState_SUPERVISOR_STATE_STANDBY || s.state == messages.SupervisorState_SUPERVISOR_STATE_STARTING {
			s.log.Info("operator restart ignored: waiting for the lease", zap.String("reason", reason))
			return
		}
		s.campaign(operatorWhy("restart", reason))
		return
	}
	if stateUp(s.state) && s.child != nil && !s.dying {
		// The cursor closes, in-flight events settle and the checkpoint is written before the
		// new cursor opens from it: nothing handled before the restart is delivered again.
		s.beginStop(ctx, &messages.Stop{Reason: reason, Graceful: true}, stopRestart)
		return
	}
	s.launch(ctx, operatorWhy("restart", reason))
}

func operatorWhy(verb, reason string) string {
	if reason == "" {
		return "operator " + verb
	}
	return "operator " + verb + ": " + reason
}

func (s *supervisorActor) maxString() string {
	if s.cfg.Policy.MaxAttempts == 0 {
		return "∞"
	}
	return strconv.Itoa(s.cfg.Policy.MaxAttempts)
}

func (s *supervisorActor) transition(to messages.SupervisorState, why string, cause error) {
	s.transitionAttempt(to, why, cause, s.attempt)
}

// transitionAttempt records, counts, logs and reports one transition.
func (s *supervisorActor) transitionAttempt(to messages.SupervisorState, why string, cause error, attempt int) {
	from := s.state
	now := s.cfg.Clock.Now()
	s.state, s.why, s.since = to, why, now
	if int(to) < len(s.transitions) {
		s.transitions[to]++
	}
	t := Transition{
		Stream: s.cfg.Stream, From: from, To: to, Why: why, At: now,
		Attempt: attempt, MaxAttempts: s.cfg.Policy.MaxAttempts, Cause: cause, Incarnation: s.inc,
	}
	if to == messages.SupervisorState_SUPERVISOR_STATE_BACKOFF {
		t.Delay = s.lastDelay
	}
	level := zapcore.InfoLevel
	switch to {
	case messages.SupervisorState_SUPERVISOR_STATE_BACKOFF:
		level = zapcore.WarnLevel
	case messages.SupervisorState_SUPERVISOR_STATE_CRASHED:
		level = zapcore.ErrorLevel
	}
	fields := []zap.Field{
		zap.String("from", stateName(from)), zap.String("to", stateName(to)), zap.String("why", why),
		zap.Int("attempt", attempt), zap.Uint64("incarnation", s.inc),
	}
	if t.Delay > 0 {
		fields = append(fields, zap.Duration("delay", t.Delay))
	}
	if cause != nil {
		fields = append(fields, zap.Error(cause))
		if pe := panicOf(cause); pe != nil {
			fields = append(fields, zap.ByteString("stack", pe.Stack))
		}
	}
	s.log.Log(level, "stream "+stateName(to), fields...)
	s.announce(t)
	s.notify(t)
	// AwaitRunning waits for the new cursor of a restart.
	if to != messages.SupervisorState_SUPERVISOR_STATE_STARTING && to != messages.SupervisorState_SUPERVISOR_STATE_BACKOFF && !s.restarting() && len(s.awaiting) > 0 {
		reply := s.status()
		for _, w := range s.awaiting {
			s.root.Send(w, reply)
		}
		s.awaiting = nil
	}
	if !canCatchUp(to) {
		s.answerCaughtUp(true)
	}
}

// onAwaitRunning answers at once unless the stream is starting or in backoff; then the answer
// waits for the next transition out of those states.
func (s *supervisorActor) onAwaitRunning(ctx actor.Context) {
	if ctx.Sender() == nil {
		return
	}
	if s.state == messages.SupervisorState_SUPERVISOR_STATE_STARTING || s.state == messages.SupervisorState_SUPERVISOR_STATE_BACKOFF || s.restarting() {
		s.awaiting = append(s.awaiting, ctx.Sender())
		return
	}
	ctx.Respond(s.status())
}

// refuseWhileStopping reports (and logs) that an operator command waits for nothing: a graceful
// stop under way finishes first, then the command can be sent again.
func (s *supervisorActor) refuseWhileStopping(verb, reason string) bool {
	if s.stop == nil {
		return false
	}
	s.log.Info("operator "+verb+" ignored: a graceful stop is under way", zap.String("reason", reason))
	return true
}

func (s *supervisorActor) addSettlements(m *messages.SettlementCounts) {
	t := &s.settlements
	if m.GetSettled() > 0 {
		// An event came: the watched collection exists (whatever the last minute's check found).
		s.nsWarning = ""
	}
	t.Settled += m.GetSettled()
	t.Handled += m.GetHandled()
	t.Filtered += m.GetFiltered()
	t.Unhandled += m.GetUnhandled()
	t.Skipped += m.GetSkipped()
	t.DeadLettered += m.GetDeadLettered()
	t.Dropped += m.GetDropped()
	s.inFlight = m.GetInFlight()
	if rt := m.GetReadThrough(); rt != nil {
		s.readThrough = rt
	}
}

func (s *supervisorActor) notify(t Transition) {
	if s.cfg.OnTransition == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("OnTransition panicked", zap.Any("panic", r))
		}
	}()
	s.cfg.OnTransition(t)
}

func (s *supervisorActor) respond(ctx actor.Context) {
	if ctx.Sender() != nil {
		ctx.Respond(s.status())
	}
}

func (s *supervisorActor) status() *messages.StatusReply {
	r := &messages.StatusReply{
		Stream:       s.cfg.Stream,
		State:        s.state,
		Why:          s.why,
		Since:        timestamppb.New(s.since),
		Attempt:      uint32(s.attempt),
		MaxAttempts:  uint32(s.cfg.Policy.MaxAttempts),
		Incarnation:  s.inc,
		Deaths:       s.deaths,
		Restarts:     s.restarts,
		StaleDropped: s.stale,
		Transitions:  make(map[string]uint64),
	}
	if !s.nextRetryAt.IsZero() {
		r.NextRetryAt = timestamppb.New(s.nextRetryAt)
	}
	if s.lastDelay > 0 {
		r.LastDelay = durationpb.New(s.lastDelay)
	}
	if s.lastCause != nil {
		r.LastCause = s.lastCause.Error()
		if pe := panicOf(s.lastCause); pe != nil {
			r.LastCauseStack = string(pe.Stack)
		}
	}
	for st, n := range s.transitions {
		if n > 0 {
			r.Transitions[stateName(messages.SupervisorState(st))] = n
		}
	}
	totals := proto.Clone(&s.settlements).(*messages.SettlementCounts)
	r.Settlements = totals
	r.InFlight, r.ReadThrough = s.inFlight, s.readThrough
	if s.checkpoint != nil {
		r.Checkpoint = s.checkpoint
	}
	if s.lastStop != nil {
		r.LastStop = s.lastStop
	}
	if s.snapshot != nil {
		r.Snapshot = s.snapshot
	}
	if s.onDemand != nil {
		r.OnDemand = s.onDemand
	}
	if s.lease != nil {
		r.Lease = proto.Clone(s.lease).(*messages.LeaseState)
	}
	if s.settledCT != nil {
		r.SettledThrough = s.settledCT
	}
	if s.nsWarning != "" {
		r.Warnings = []string{s.nsWarning}
	}
	return r
}

// onOnDemand forwards an on-demand snapshot request to the on-demand sibling, which answers the
// requester; only a running stream takes one (its live events must reach the dispatcher to
// close the chunks' windows).
func (s *supervisorActor) onOnDemand(ctx actor.Context, m *messages.OnDemandSnapshot) {
	if s.state != messages.SupervisorState_SUPERVISOR_STATE_RUNNING {
		ctx.Respond(&messages.OnDemandSnapshotReply{Code: treekit.OnDemandNotRunning,
			Error: fmt.Sprintf("the stream is %s here, not running (%s)", stateName(s.state), s.why)})
		return
	}
	pid := s.lazySibling(ctx, s.cfg.OnDemand)
	if pid == nil {
		ctx.Respond(&messages.OnDemandSnapshotReply{Code: treekit.OnDemandUnsupported, Error: "the stream has no on-demand snapshot actor"})
		return
	}
	ctx.RequestWithCustomSender(pid, m, ctx.Sender())
}

// abandonOnDemand ends a running on-demand snapshot: a new incarnation starts with a new
// dispatcher position, and the chunks' windows would never close.
func (s *supervisorActor) abandonOnDemand(ctx actor.Context, why string) {
	if pid := s.siblingByName(s.cfg.OnDemand); pid != nil {
		ctx.Send(pid, &wire.AbandonOnDemand{Why: why})
	}
}
