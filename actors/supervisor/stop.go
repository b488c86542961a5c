package supervisor

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// defaultStopTimeout bounds a graceful Stop whose timeout_ms is 0.
const defaultStopTimeout = 30 * time.Second

// stopPhase is the step a graceful stop waits for.
type stopPhase uint8

const (
	phaseStream  stopPhase = iota // the stream actor is stopping (its cursor closes)
	phaseDrain                    // Drain sent to the dispatcher, waiting for Drained
	phaseFlush                    // Flush sent to the checkpointer, waiting for Flushed
	phaseRelease                  // SingleLeader: Resign sent to the leader actor, waiting for Resigned
)

var phaseNames = [...]string{"stream actor stop", "drain", "checkpoint flush", "lease release"}

func (p stopPhase) String() string { return phaseNames[p] }

// stopKind is what a graceful stop ends in.
type stopKind uint8

const (
	stopOperator stopKind = iota // an operator Stop: stopped, the requesters answered
	stopHandover                 // a balance or operator handover: standby, the lease released to campaign again
	stopRestart                  // an operator Restart: a new incarnation, the lease kept
)

// stopRun is one graceful stop in progress. Every Stop that arrives meanwhile joins it.
type stopRun struct {
	gen      uint64
	reason   string
	phase    stopPhase
	started  time.Time
	deadline time.Duration // the stop's deadline, a clock.Mono reading (Now may step meanwhile)
	timer    clock.Timer
	waiters  []*actor.PID
	report   *messages.StopReport
	kind     stopKind
	// leaseLost: the lease was lost meanwhile, so no final write is made (and a restart ends
	// in standby, as a handover does).
	leaseLost bool
	// cooldown is a handover's least wait before this instance may lead again (ReleaseLease).
	cooldown time.Duration
}

// stopDeadline is the graceful stop's own timer firing (a message to self, plain Go). A
// deadline of an older run is dropped.
type stopDeadline struct{ gen uint64 }

// onGracefulStop starts the sequence stream actor stop → drain → flush → stopped, or joins the
// one under way. The requester (if any) gets the StatusReply when the sequence ends.
func (s *supervisorActor) onGracefulStop(ctx actor.Context, m *messages.Stop) {
	if s.stop != nil {
		if ctx.Sender() != nil {
			s.stop.waiters = append(s.stop.waiters, ctx.Sender())
		}
		// An operator stop during a handover or a restart ends stopped.
		if s.stop.kind == stopRestart {
			s.stop.reason = m.GetReason()
		}
		s.stop.kind = stopOperator
		return
	}
	if s.state == messages.SupervisorState_SUPERVISOR_STATE_STOPPED {
		s.respond(ctx)
		return
	}
	s.beginStop(ctx, m, stopOperator)
}

// beginStop starts a graceful stop of that kind. The requester of an operator stop gets the
// answer when it ends; for a handover the caller decides who waits (ReleaseLease's requester
// does), and a restart's requester is answered at once (its AwaitRunning waits for the new
// cursor).
func (s *supervisorActor) beginStop(ctx actor.Context, m *messages.Stop, kind stopKind) {
	timeout := time.Duration(m.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultStopTimeout
	}
	now := s.cfg.Clock.Now()
	s.stopGen++
	run := &stopRun{gen: s.stopGen, reason: m.GetReason(), started: now, deadline: clock.Mono(s.cfg.Clock) + timeout,
		report: &messages.StopReport{}, kind: kind}
	if ctx.Sender() != nil && kind == stopOperator {
		run.waiters = append(run.waiters, ctx.Sender())
	}
	root, self, gen := s.root, s.self, run.gen
	run.timer = s.cfg.Clock.AfterFunc(timeout, func() { root.Send(self, &stopDeadline{gen: gen}) })
	s.stop = run
	s.cancelTimer()
	s.transition(messages.SupervisorState_SUPERVISOR_STATE_STOPPING, run.verb()+": closing the cursor", nil)
	if s.child == nil {
		s.stopAdvance(ctx)
		return
	}
	s.stopChild()
}

// stopAdvance moves the graceful stop past the step it waited for.
func (s *supervisorActor) stopAdvance(ctx actor.Context) {
	run := s.stop
	switch run.phase {
	case phaseStream:
		run.phase = phaseDrain
		if s.askSibling(ctx, run, "drain", s.cfg.Dispatcher, "draining the dispatcher", &wire.Drain{TimeoutMs: s.drainBudgetMs(run)}) {
			return
		}
		fallthrough
	case phaseDrain:
		run.phase = phaseFlush
		if s.askSibling(ctx, run, "checkpoint flush", s.cfg.Checkpointer, "writing the final checkpoint", &wire.Flush{}) {
			return
		}
		fallthrough
	case phaseFlush:
		// A restart keeps the lease (the next incarnation goes on in the same term), unless
		// it was lost meanwhile: then it is released as a handover does, and this instance
		// stands by.
		if s.leader != nil && (run.kind != stopRestart || run.leaseLost) {
			run.phase = phaseRelease
			s.why = run.verb() + ": releasing the lease"
			req := &wire.Resign{Reason: run.reason, CampaignAgain: run.kind != stopOperator}
			if run.kind == stopHandover {
				req.CooldownMs = max(s.cfg.HandOverCooldown, run.cooldown).Milliseconds()
			}
			s.leaseEpoch = 0
			ctx.Request(s.leader, req)
			return
		}
		fallthrough
	default:
		s.finishStop(ctx)
	}
}

// verb names the run in the why line: "operator stop: …" or "operator restart: …".
func (run *stopRun) verb() string {
	if run.kind == stopRestart {
		return operatorWhy("restart", run.reason)
	}
	return operatorWhy("stop", run.reason)
}

// restarting reports whether an operator restart's graceful sequence is under way.
func (s *supervisorActor) restarting() bool { return s.stop != nil && s.stop.kind == stopRestart }

func (s *supervisorActor) skipStep(run *stopRun, note string) {
	if run.report.Skipped != "" {
		note = run.report.Skipped + ", " + note
	}
	run.report.Skipped = note
}

// askSibling sends msg, the stop's step, to the sibling name and records why the stop waits,
// and reports whether it did. It skips the step (noted in the stop's report) when the lease
// was lost, since what the step writes would be refused, or when the sibling is not healthy.
func (s *supervisorActor) askSibling(ctx actor.Context, run *stopRun, step, name, why string, msg any) bool {
	if run.leaseLost {
		s.skipStep(run, step+" (the lease was lost)")
		return false
	}
	pid := s.healthySibling(name, run)
	if pid == nil {
		return false
	}
	s.why = run.verb() + ": " + why
	ctx.Request(pid, msg)
	return true
}

// healthySibling returns the PID of the named sibling, or nil (noting the skipped step) when it
// does not exist or failed and is suspended: a suspended actor would answer nothing.
func (s *supervisorActor) healthySibling(name string, run *stopRun) *actor.PID {
	pid := s.siblingByName(name)
	if pid == nil {
		return nil
	}
	if _, down := s.siblingsDown[pid.Id]; down {
		note := run.phase.String() + " (the " + name + " failed)"
		if run.report.Skipped != "" {
			note = run.report.Skipped + ", " + note
		}
		run.report.Skipped = note
		return nil
	}
	return pid
}

// drainBudgetMs gives the drain three quarters of the time left, so that the final flush fits.
// The time left is measured on the monotonic reading: a step of Now would cut the drain short
// (forward) or stretch it past the stop's own timer (backward).
func (s *supervisorActor) drainBudgetMs(run *stopRun) int64 {
	left := run.deadline - clock.Mono(s.cfg.Clock)
	return max(left.Milliseconds()*3/4, 1)
}

// onDrained records the dispatcher's answer and goes on to the flush.
func (s *supervisorActor) onDrained(ctx actor.Context, m *wire.Drained) {
	if s.stop == nil || s.stop.phase != phaseDrain {
		return
	}
	r := s.stop.report
	r.Settled, r.Unsettled, r.Drained = m.GetSettled(), m.GetUnsettled(), !m.GetTimedOut()
	switch {
	case s.stop.leaseLost:
		// The dispatcher was restarted when the lease was lost: its drain ended there.
		r.Drained = false
		s.skipStep(s.stop, fmt.Sprintf("the rest of the drain (the lease was lost; %d events unsettled, the next leader's)", m.GetUnsettled()))
	case m.GetTimedOut():
		s.stopError(fmt.Sprintf("drain timed out: %d events unsettled, redelivered on the next start", m.GetUnsettled()))
		r.HeldUpBy = phaseDrain.String()
	}
	s.stopAdvance(ctx)
}

// onFlushed records the checkpointer's answer and ends the stop.
func (s *supervisorActor) onFlushed(ctx actor.Context, m *wire.Flushed) {
	if s.stop == nil || s.stop.phase != phaseFlush {
		return
	}
	r := s.stop.report
	r.LowWaterMark, r.Fenced = m.GetLowWaterMark(), m.GetFenced()
	switch {
	case m.GetFenced():
		// Another instance owns the stream and resumes from its own position.
		s.log.Warn("final checkpoint not written: fenced by a newer lease epoch")
	case m.GetError() != "":
		s.stopError("final checkpoint write failed: " + m.GetError())
	default:
		r.Flushed = true
	}
	s.stopAdvance(ctx)
}

// onStopDeadline ends a stop whose step did not answer in time, naming the step.
func (s *supervisorActor) onStopDeadline(ctx actor.Context, m *stopDeadline) {
	if s.stop == nil || s.stop.gen != m.gen {
		return
	}
	step := s.stop.phase.String()
	if s.stop.report.HeldUpBy == "" { // the first step that held the stop up (a drain that timed out leaves the flush little time)
		s.stop.report.HeldUpBy = step
	}
	s.stopError(fmt.Sprintf("the %s did not finish within the stop timeout", step))
	s.stop.timer = nil
	s.finishStop(ctx)
}

func (s *supervisorActor) stopError(msg string) {
	if r := s.stop.report; r.Error == "" {
		r.Error = msg
	} else {
		r.Error += "; " + msg
	}
}

// onSiblingFailedWhileStopping skips the step that waits for a sibling that just failed.
func (s *supervisorActor) onSiblingFailedWhileStopping(ctx actor.Context, name string) {
	run := s.stop
	waiting := (run.phase == phaseDrain && name == s.cfg.Dispatcher) || (run.phase == phaseFlush && name == s.cfg.Checkpointer)
	if !waiting {
		return
	}
	s.stopError(fmt.Sprintf("the %s failed during the %s", name, run.phase))
	s.stopAdvance(ctx)
}

// finishStop enters stopped (standby after a handover) and answers everyone who asked for the
// stop; a restart launches the next incarnation instead. ctx may be nil only when the run
// cannot launch (abortStop clears restart first).
func (s *supervisorActor) finishStop(ctx actor.Context) {
	run := s.stop
	s.stop = nil
	if run.timer != nil {
		run.timer.Stop()
	}
	// The drained dispatcher accepts nothing more: the next launch restarts it.
	s.restartDispatcher = true
	run.report.Took = durationpb.New(s.cfg.Clock.Now().Sub(run.started))
	s.lastStop = run.report
	why := run.verb()
	if run.report.Error != "" {
		why += " (" + run.report.Error + ")"
	}
	relaunch := run.kind == stopRestart && !run.leaseLost
	if s.leader != nil && !relaunch {
		s.leaseEpoch = 0
		s.freshTerm = true // the next leadership term starts from the stored position
	}
	s.log.Info("graceful stop finished", zap.Uint64("settled", run.report.GetSettled()),
		zap.Uint64("unsettled", run.report.GetUnsettled()), zap.Uint64("low_water_mark", run.report.GetLowWaterMark()),
		zap.Bool("flushed", run.report.GetFlushed()), zap.String("held_up_by", run.report.GetHeldUpBy()),
		zap.String("skipped", run.report.GetSkipped()), zap.Duration("took", run.report.GetTook().AsDuration()),
		zap.Bool("restart", run.kind == stopRestart))
	switch {
	case relaunch:
		s.attempt = 0
		s.launch(ctx, why)
	case run.kind != stopOperator: // a handover, or a restart whose lease was lost
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STANDBY, why, nil)
	default:
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STOPPED, why, nil)
	}
	reply := s.status()
	for _, w := range run.waiters {
		s.root.Send(w, reply)
	}
}

// abortStop answers the waiters of a stop cut short by the supervisor's own stop.
func (s *supervisorActor) abortStop() {
	if s.stop == nil {
		return
	}
	s.stopError("the supervisor stopped during the " + s.stop.phase.String())
	if s.stop.report.HeldUpBy == "" {
		s.stop.report.HeldUpBy = s.stop.phase.String()
	}
	s.stop.kind = stopOperator // nothing is launched under a supervisor that stops
	s.finishStop(nil)
}

// siblingByName returns the live sibling of that name, or nil.
func (s *supervisorActor) siblingByName(name string) *actor.PID {
	if name == "" {
		return nil
	}
	for _, sib := range s.siblings {
		if sib.name == name {
			return sib.pid
		}
	}
	return nil
}
