package supervisor

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// caughtUpWaiter is an AwaitCaughtUp requester and its target (packed seconds<<32|increment).
type caughtUpWaiter struct {
	to     *actor.PID
	target uint64
}

// packCT orders cluster times as one number; nil is 0.
func packCT(ct *messages.ClusterTime) uint64 {
	return uint64(ct.GetSeconds())<<32 | uint64(ct.GetIncrement())
}

// canCatchUp reports whether the stream may still settle events on this instance: it is not
// stopped, crashed or in standby (another instance leads).
func canCatchUp(st messages.SupervisorState) bool {
	return !stateDown(st) && st != messages.SupervisorState_SUPERVISOR_STATE_STANDBY
}

// onAwaitCaughtUp answers at once when every event at or before the target has settled (the
// settled position's cluster time is after it), or when the stream cannot get there here;
// otherwise the answer waits for a SettledThrough past the target or a state that cannot.
func (s *supervisorActor) onAwaitCaughtUp(ctx actor.Context, m *messages.AwaitCaughtUp) {
	if ctx.Sender() == nil {
		return
	}
	target := packCT(m.GetClusterTime())
	if s.settledThrough > target || !canCatchUp(s.state) {
		ctx.Respond(s.caughtUpReply(target))
		return
	}
	s.caughtUp = append(s.caughtUp, caughtUpWaiter{to: ctx.Sender(), target: target})
}

// onSettledThrough records the checkpointer's settled position (it only moves forward here: a
// restarted checkpointer may start from an older stored one) and answers the waiters it passed.
func (s *supervisorActor) onSettledThrough(m *wire.SettledThrough) {
	ct := &messages.ClusterTime{Seconds: m.GetClusterTime().GetSeconds(), Increment: m.GetClusterTime().GetIncrement()}
	if p := packCT(ct); p > s.settledThrough {
		s.settledThrough, s.settledCT = p, ct
	}
	s.answerCaughtUp(false)
}

// answerCaughtUp answers the waiters whose target the settled position passed, and all of them
// when all is set (the stream entered a state it cannot catch up in).
func (s *supervisorActor) answerCaughtUp(all bool) {
	if len(s.caughtUp) == 0 {
		return
	}
	keep := s.caughtUp[:0]
	for _, w := range s.caughtUp {
		if all || s.settledThrough > w.target {
			s.root.Send(w.to, s.caughtUpReply(w.target))
			continue
		}
		keep = append(keep, w)
	}
	clear(s.caughtUp[len(keep):])
	s.caughtUp = keep
}

// caughtUpReply is the answer for target now.
func (s *supervisorActor) caughtUpReply(target uint64) *messages.CaughtUpReply {
	return &messages.CaughtUpReply{CaughtUp: s.settledThrough > target, SettledThrough: s.settledCT, Status: s.status()}
}
