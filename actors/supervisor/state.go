package supervisor

import (
	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/messages"
)

// A stream's lifecycle state is the protobuf enum messages.SupervisorState, the value
// StatusReply.State carries; this package has no state type of its own.
//
//	starting → running            the stream actor sent Resubscribed for its incarnation
//	starting → snapshotting       the stream actor sent Snapshotting: its position is fixed and a
//	                              snapshot runs before the cursor opens
//	snapshotting → running        the snapshot finished and the cursor is open (Resubscribed)
//	starting|running → backoff    the stream actor died; a restart is scheduled
//	backoff → starting            the restart timer fired, or an operator Start/Restart
//	any → crashed                 a terminal error, or attempts exhausted (give-up)
//	any → stopping → stopped      a graceful Stop: cursor closed, dispatcher drained, checkpoint flushed
//	any → stopped                 a non-graceful Stop, or the supervisor itself stopping
//	stopped|crashed → starting    an operator Start or Restart
//
// Standby (SingleLeader, waiting for the lease) is reserved for the leader actor; nothing in
// this package enters it yet.

// numStates sizes the per-state counters: every value of the enum, unspecified included.
const numStates = int(messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING) + 1

// stateName returns the lower-case name of s used in logs, in Resign reasons and as the keys of
// StatusReply.transitions: package status's names, which read them back, and
// "unspecified" for the zero value a supervisor starts from.
func stateName(s messages.SupervisorState) string {
	if s == messages.SupervisorState_SUPERVISOR_STATE_UNSPECIFIED {
		return "unspecified"
	}
	return string(statusx.StateOf(s))
}

// stateUp reports whether the stream actor is supposed to be running and alive in s.
func stateUp(s messages.SupervisorState) bool {
	return s == messages.SupervisorState_SUPERVISOR_STATE_STARTING ||
		s == messages.SupervisorState_SUPERVISOR_STATE_RUNNING ||
		s == messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING
}

// stateDown reports whether the stream actor is not supposed to run in s.
func stateDown(s messages.SupervisorState) bool {
	return s == messages.SupervisorState_SUPERVISOR_STATE_STOPPED ||
		s == messages.SupervisorState_SUPERVISOR_STATE_CRASHED
}
