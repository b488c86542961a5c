package supervisor

import "github.com/watchtree/watchtree/messages"

// State is the lifecycle state of one stream.
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
// Standby (SINGLE_LEADER, waiting for the lease) is reserved for the leader actor; nothing in
// this package enters it yet.
type State uint8

// The states, in the order of the protobuf enum SupervisorState.
const (
	StateUnspecified State = iota
	StateStarting
	StateStandby
	StateRunning
	StateBackoff
	StateStopped
	StateCrashed
	// StateStopping: a graceful stop is under way (cursor closed, dispatcher draining,
	// checkpointer flushing); stopped follows.
	StateStopping
	// StateSnapshotting: the stream actor's start position is fixed (persisted) and a snapshot
	// copies the existing documents before the change stream opens; running follows.
	StateSnapshotting
)

var stateNames = [...]string{"unspecified", "starting", "standby", "running", "backoff", "stopped", "crashed", "stopping", "snapshotting"}

// String returns the lower-case state name used in logs and in StatusReply.transitions.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// proto returns the protobuf enum value of s.
func (s State) proto() messages.SupervisorState { return messages.SupervisorState(s) }

// stateFromProto converts the protobuf enum back into a State.
func stateFromProto(s messages.SupervisorState) State {
	if s < 0 || int(s) >= len(stateNames) {
		return StateUnspecified
	}
	return State(s)
}

// up reports whether the stream actor is supposed to be running and alive in s.
func (s State) up() bool { return s == StateStarting || s == StateRunning || s == StateSnapshotting }

// down reports whether the stream actor is not supposed to run in s.
func (s State) down() bool { return s == StateStopped || s == StateCrashed }
