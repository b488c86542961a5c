package consoleserver

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// OnEvent implements observe.Observer: it publishes ev as the console's lifecycle event (see
// publish). The runtime adds the console to its Observer, so it runs on the observer queue's
// goroutine; it never blocks (an actor send).
func (s *Server) OnEvent(ev observe.Event) { s.publish(lifecycleEventOf(ev)) }

// lifecycleEventOf is the console's message for ev: kind, stream, time and one-line message for
// every kind, and the cause and attempt of the kinds that carry them. It is the one mapping of
// observe events to messages.LifecycleEvent.
func lifecycleEventOf(ev observe.Event) *messages.LifecycleEvent {
	m := ev.EventMeta()
	out := &messages.LifecycleEvent{Stream: m.Stream, At: timestamppb.New(m.Time), Kind: ev.Kind().String(),
		Message: ev.String()}
	cause := func(err error) {
		if err != nil {
			out.Cause = err.Error()
		}
	}
	switch e := ev.(type) {
	case observe.Started, observe.Checkpointed, observe.GapRecorded:
		// kind, time and message say it all
	case observe.Stopped:
		out.Attempt = uint32(e.Attempt)
		cause(e.Cause)
	case observe.Restarted:
		out.Attempt = uint32(e.Attempt)
		cause(e.Cause)
	case observe.RetryScheduled:
		out.Attempt = uint32(e.Attempt)
		cause(e.Err)
	case observe.Skipped:
		out.Cause = e.Detail
	case observe.DeadLettered:
		out.Attempt = uint32(e.Attempts)
		cause(e.Err)
	case observe.DeadLetterFailed:
		cause(e.Err)
	case observe.CheckpointFailed:
		cause(e.Err)
	case observe.CheckpointRefused:
		cause(e.Err)
	case observe.HistoryLost:
		cause(e.Err)
	case observe.Invalidated:
		out.Cause = e.Cause
	case observe.LeadershipChanged:
		out.Cause = e.Why
	case observe.SnapshotStarted:
		out.Cause = snapshotCause(e.Snapshot)
	case observe.SnapshotResumed:
		out.Cause = snapshotCause(e.Snapshot)
	case observe.SnapshotProgress:
		out.Cause = snapshotCause(e.Snapshot)
	case observe.SnapshotDone:
		out.Cause = snapshotCause(e.Snapshot)
	case observe.NamespaceMissing:
		out.Cause = "namespace " + e.Namespace + " does not exist"
	case observe.CursorChanged:
		out.Cause = e.Why
	}
	return out
}

// snapshotCause is what a snapshot event has to warn of: the error that ended its run, else the
// at-risk warning.
func snapshotCause(s observe.SnapshotStatus) string {
	if s.Error != "" {
		return s.Error
	}
	if s.AtRisk {
		return s.Warning
	}
	return ""
}
