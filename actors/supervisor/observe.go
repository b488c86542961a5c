package supervisor

import (
	"errors"
	"strings"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// gaveUpError is the cause of a give-up: streamtree.ErrGaveUp around the latest death's cause.
type gaveUpError struct{ cause error }

func (e *gaveUpError) Error() string {
	msg := e.cause.Error()
	if strings.Contains(msg, streamtree.ErrGaveUp.Error()) {
		return msg
	}
	return streamtree.ErrGaveUp.Error() + ": " + msg
}

func (e *gaveUpError) Unwrap() []error { return []error{streamtree.ErrGaveUp, e.cause} }

// gaveUp wraps cause with streamtree.ErrGaveUp unless it already matches it.
func gaveUp(cause error) error {
	if cause == nil || errors.Is(cause, streamtree.ErrGaveUp) {
		return cause
	}
	return &gaveUpError{cause: cause}
}

// lifecycle turns the transitions of one stream into its observe lifecycle events. observe.Started
// is not among them: the stream actor reports it when its cursor opens.
type lifecycle struct {
	// stopFromCrashed is set while a stream that had crashed stops: its terminal Stopped was
	// reported already, so the stop reports nothing more.
	stopFromCrashed bool
}

// eventOf returns the event t means for the user, or nil.
func (l *lifecycle) eventOf(stream string, t Transition) observe.Event {
	meta := observe.Meta{Stream: stream, Time: t.At}
	switch t.To {
	case messages.SupervisorState_SUPERVISOR_STATE_RUNNING:
		if t.Attempt > 0 {
			return observe.Restarted{Meta: meta, Attempt: t.Attempt, Cause: t.Cause}
		}
	case messages.SupervisorState_SUPERVISOR_STATE_BACKOFF:
		return observe.Stopped{Meta: meta, Reason: observe.Crashed, Cause: t.Cause, Attempt: t.Attempt, RestartIn: t.Delay}
	case messages.SupervisorState_SUPERVISOR_STATE_CRASHED:
		return observe.Stopped{Meta: meta, Reason: observe.Crashed, Cause: t.Cause, Terminal: true}
	case messages.SupervisorState_SUPERVISOR_STATE_STOPPING:
		l.stopFromCrashed = t.From == messages.SupervisorState_SUPERVISOR_STATE_CRASHED
	case messages.SupervisorState_SUPERVISOR_STATE_STOPPED:
		if t.From == messages.SupervisorState_SUPERVISOR_STATE_STOPPING && l.stopFromCrashed {
			return nil
		}
		return observe.Stopped{Meta: meta, Reason: observe.Graceful}
	}
	return nil
}

// announce reports t's lifecycle event, if any, to the Observer, recovering a panic of it.
func (s *supervisorActor) announce(t Transition) {
	ev := s.life.eventOf(s.cfg.Stream, t)
	if ev == nil {
		return
	}
	treekit.Report(s.cfg.Observer, s.log, "supervisor", ev)
}
