package supervisor

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// SingleLeader: the supervisor runs the stream actor only while its leader actor holds the
// lease. The leader actor campaigns (standby), reports LeaseGranted (the supervisor launches
// the stream under that epoch), LeaseLost (the stream actor stops and the dispatcher is
// restarted at once, so no handler keeps running: standby), and HandOver (balance: a graceful
// stop that ends in standby). A fenced write, whoever reports it, is handled like a lost lease.

func (s *supervisorActor) spawnLeader(ctx actor.Context) {
	if s.cfg.Leader == nil {
		return
	}
	pid, err := ctx.SpawnNamed(s.cfg.Leader, s.cfg.LeaderName) // under the child middleware (New)
	if err != nil {
		// Only a name clash can get here; without its leader actor the stream never runs.
		s.log.Error("leader actor spawn failed", zap.Error(err))
		return
	}
	s.leader = pid
}

// leads reports whether the stream runs under a lease this instance holds.
func (s *supervisorActor) leads() bool { return s.leaseEpoch > 0 }

// campaign asks the leader actor to seek the lease; the stream is starting until the leader
// actor's first answer (granted: the stream actor starts; held by another: standby).
func (s *supervisorActor) campaign(why string) {
	s.cancelTimer()
	if s.lease.GetRole() == messages.LeaseRole_LEASE_ROLE_STANDBY {
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STANDBY, why+": "+s.lease.GetWhy(), nil)
	} else {
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STARTING, why+": campaigning for the lease", nil)
	}
	s.root.Send(s.leader, &wire.Campaign{Reason: why})
}

func (s *supervisorActor) onLeaseState(m *messages.LeaseState) {
	s.lease = m
	if m.GetRole() != messages.LeaseRole_LEASE_ROLE_STANDBY || s.leads() || s.stop != nil {
		return
	}
	switch s.state {
	case messages.SupervisorState_SUPERVISOR_STATE_STARTING:
		if !m.GetAnswered() {
			// The campaign's start: the first acquisition is in flight, and nobody is known to
			// lead. The stream stays starting (Spawn waits) until the store has answered.
			s.why = m.GetWhy()
			return
		}
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STANDBY, m.GetWhy(), nil)
	case messages.SupervisorState_SUPERVISOR_STATE_STANDBY:
		s.why = m.GetWhy()
	}
}

func (s *supervisorActor) onLeaseGranted(ctx actor.Context, m *wire.LeaseGranted) {
	if s.stop != nil || stateDown(s.state) {
		// A grant that crossed a stop: give the lease back.
		s.root.Send(s.leader, &wire.Resign{Reason: "the stream is " + stateName(s.state)})
		return
	}
	s.leaseEpoch = m.GetEpoch()
	s.attempt = 0
	s.launch(ctx, fmt.Sprintf("lease acquired (epoch %d)", m.GetEpoch()))
}

// onLeaseLost stops processing at once: the stream actor stops (its cursor closes) and the
// dispatcher restarts (its lanes end), and the stream waits in standby while the leader actor
// campaigns again. The next term starts with a fresh checkpointer.
func (s *supervisorActor) onLeaseLost(_ actor.Context, why string) {
	if !s.leads() {
		return
	}
	s.leaseEpoch = 0
	s.freshTerm = true
	s.stopChild()
	s.haltDispatcher()
	if s.stop != nil {
		// A graceful stop (operator stop, handover, restart) goes on to release the lease, but
		// no handler may run for a lease that may be gone: the drain is cut short, and the
		// final checkpoint is not written (the next leader owns the position).
		s.stop.leaseLost = true
		s.stop.report.LeaseLost = true
		s.why = s.stop.verb() + ": " + why + "; handling stopped at once"
		return
	}
	s.cancelTimer()
	s.restartDispatcher = false
	if !stateDown(s.state) {
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STANDBY, why, nil)
	}
}

// haltDispatcher restarts the dispatcher (unless it failed and is suspended): its lanes'
// context is cancelled, so in-flight handler calls are interrupted and no queued event starts,
// and the new instance holds nothing. A Drain it was answering is answered as cut short.
func (s *supervisorActor) haltDispatcher() {
	if pid := s.siblingByName(s.cfg.Dispatcher); pid != nil {
		if _, down := s.siblingsDown[pid.Id]; !down {
			s.sup.RestartChildren(pid)
		}
	}
}

// fenced handles a write refused by a newer epoch (a checkpoint write escalated by the
// checkpointer): the stream stops at once, and the leader actor hears of it.
func (s *supervisorActor) fenced(cause error) {
	s.fencings++
	epoch := s.leaseEpoch
	s.log.Error("write fenced by a newer lease epoch; the stream stops", zap.Int64("epoch", epoch), zap.Error(cause))
	s.root.Send(s.leader, &wire.Fenced{Epoch: epoch, Why: cause.Error()})
	if s.leads() {
		s.onLeaseLost(nil, "fenced: "+cause.Error())
		return
	}
	s.stopChild()
	if !stateDown(s.state) && s.state != messages.SupervisorState_SUPERVISOR_STATE_STANDBY {
		s.transition(messages.SupervisorState_SUPERVISOR_STATE_STANDBY, "fenced: "+cause.Error(), nil)
	}
}

// onFencedReport is a fenced write reported from outside the tree (a dead-letter write).
func (s *supervisorActor) onFencedReport(_ actor.Context, m *wire.Fenced) {
	if !s.leads() || (m.GetEpoch() != 0 && m.GetEpoch() != s.leaseEpoch) {
		return
	}
	s.fenced(fmt.Errorf("%s", m.GetWhy()))
}

func (s *supervisorActor) onHandOver(ctx actor.Context, m *wire.HandOver) {
	// Any state with the lease (running, starting, backoff) can hand over: the graceful stop
	// stops whatever runs. A HandOver of another term, or during a stop, is stale.
	if stateDown(s.state) || s.stop != nil || !s.leads() || m.GetEpoch() != s.leaseEpoch {
		return
	}
	s.beginStop(ctx, &messages.Stop{Reason: "handover for balance: " + m.GetWhy(), Graceful: true}, stopHandover)
}

// onReleaseLease hands the lease over on an operator's request, as a balance handover does; the
// requester is answered when the sequence ended (standby), or at once when there is nothing to
// release here.
func (s *supervisorActor) onReleaseLease(ctx actor.Context, m *messages.ReleaseLease) {
	if s.leader == nil || stateDown(s.state) || s.stop != nil || !s.leads() {
		s.respond(ctx)
		return
	}
	s.beginStop(ctx, &messages.Stop{Reason: operatorWhy("lease release", m.GetReason()), Graceful: true}, stopHandover)
	if s.stop == nil { // the sequence ended at once
		s.respond(ctx)
		return
	}
	s.stop.cooldown = s.cfg.ReleaseCooldown
	if ctx.Sender() != nil {
		s.stop.waiters = append(s.stop.waiters, ctx.Sender())
	}
}

func (s *supervisorActor) onResigned(ctx actor.Context, m *wire.Resigned) {
	if s.stop == nil || s.stop.phase != phaseRelease {
		return
	}
	if m.GetError() != "" {
		s.stopError("lease release failed (it lapses at its expiry): " + m.GetError())
	}
	s.stop.report.Released = m.GetReleased()
	s.finishStop(ctx)
}

// resignLease tells the leader actor to release the lease and stop campaigning (a give-up, a
// non-graceful stop).
func (s *supervisorActor) resignLease(why string) {
	if s.leader == nil {
		return
	}
	s.leaseEpoch = 0
	s.freshTerm = true
	s.root.Send(s.leader, &wire.Resign{Reason: why})
}

// onLeaderFailure restarts a failed leader actor. Its lease is no longer renewed, so the stream
// stops as if the lease were lost, and the new leader actor campaigns again.
func (s *supervisorActor) onLeaderFailure(ctx actor.Context, f failure) {
	s.log.Error("leader actor failed; restarting it", zap.Error(streamtree.AsError(f.reason)))
	s.sup.RestartChildren(f.who)
	s.lease = nil
	s.onLeaseLost(ctx, "the leader actor failed: "+streamtree.AsError(f.reason).Error())
	if s.state == messages.SupervisorState_SUPERVISOR_STATE_STANDBY || s.state == messages.SupervisorState_SUPERVISOR_STATE_STARTING {
		s.root.Send(s.leader, &wire.Campaign{Reason: "leader actor restarted"})
	}
}
