package statusx

import (
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/status"
)

// Local is what this instance knows of a stream beyond its supervisor's reply: the Handle and
// the console give it to Read, so that both report the same name, mode, cursor and warnings.
type Local struct {
	// Name is the stream's name: the status's when the supervisor did not answer (a nil reply),
	// and the reply's otherwise.
	Name string
	// Mode is ModeAllInstances or ModeSingleLeader; Cursor as Stream.Cursor.
	Mode, Cursor string
	// Warnings are the instance's own warnings about the stream (a Shared stream on a dedicated
	// cursor), appended to the supervisor's.
	Warnings []string
}

// NotRunningWhy is the reason of a stream whose supervisor is not running (its tree was never
// started or has stopped with the runtime): its state is Stopped.
const NotRunningWhy = "the stream's supervisor is not running"

var stateNames = map[messages.SupervisorState]status.State{
	messages.SupervisorState_SUPERVISOR_STATE_STARTING:     status.Starting,
	messages.SupervisorState_SUPERVISOR_STATE_STANDBY:      status.Standby,
	messages.SupervisorState_SUPERVISOR_STATE_RUNNING:      status.Running,
	messages.SupervisorState_SUPERVISOR_STATE_BACKOFF:      status.Backoff,
	messages.SupervisorState_SUPERVISOR_STATE_STOPPED:      status.Stopped,
	messages.SupervisorState_SUPERVISOR_STATE_CRASHED:      status.Crashed,
	messages.SupervisorState_SUPERVISOR_STATE_STOPPING:     status.Stopping,
	messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING: status.Snapshotting,
}

// StateOf returns the name of s (Unknown for an unset or unknown value).
func StateOf(s messages.SupervisorState) status.State {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return status.Unknown
}

// Read reads a supervisor's reply r into a Stream, with l's mode and cursor and l's warnings
// after the reply's. A nil r (the supervisor is not running) reads as a Stopped stream named
// l.Name with the reason NotRunningWhy.
func Read(r *messages.StatusReply, l Local) status.Stream {
	if r == nil {
		return status.Stream{Name: l.Name, Mode: l.Mode, Cursor: l.Cursor, State: status.Stopped, Why: NotRunningWhy,
			Warnings: slices.Clone(l.Warnings)}
	}
	st := status.Stream{
		Name: r.GetStream(), Mode: l.Mode, Cursor: l.Cursor,
		State: StateOf(r.GetState()), Why: r.GetWhy(), Since: timeOf(r.GetSince()),
		Attempt: r.GetAttempt(), MaxAttempts: r.GetMaxAttempts(), NextRetryAt: timeOf(r.GetNextRetryAt()),
		LastCause: r.GetLastCause(), Incarnation: r.GetIncarnation(), Deaths: r.GetDeaths(), Restarts: r.GetRestarts(),
		InFlight: r.GetInFlight(), ReadThrough: timeOf(r.GetReadThrough()),
		SettledThrough: bson.Timestamp{T: r.GetSettledThrough().GetSeconds(), I: r.GetSettledThrough().GetIncrement()},
	}
	if st.Name == "" {
		st.Name = l.Name
	}
	if w := slices.Concat(r.GetWarnings(), l.Warnings); len(w) > 0 {
		st.Warnings = w
	}
	if cp := r.GetCheckpoint(); cp != nil {
		st.CheckpointSource, st.CheckpointAt = cp.GetSource(), timeOf(cp.GetWrittenAt())
		if len(cp.GetToken()) > 0 {
			st.Checkpoint = slices.Clone(bson.Raw(cp.GetToken()))
		}
	}
	c := r.GetSettlements()
	st.Settled, st.Handled, st.Filtered = c.GetSettled(), c.GetHandled(), c.GetFiltered()
	st.Unhandled, st.Skipped = c.GetUnhandled(), c.GetSkipped()
	// A dropped event (dead letters disabled) ran out of attempts as a dead-lettered one did;
	// the status counts both, so that the outcomes add up to Settled.
	st.DeadLettered = c.GetDeadLettered() + c.GetDropped()
	if l := r.GetLease(); l != nil {
		// The reply's owner is this instance and its holder the lease's holder: the status
		// calls them Instance and Owner, as the console row's lease_owner does.
		st.Lease = &status.Lease{Role: RoleOf(l.GetRole()), Instance: l.GetOwner(), Owner: l.GetHolder(), Epoch: l.GetEpoch(),
			ExpiresAt: timeOf(l.GetExpiresAt()), Why: l.GetWhy(),
			Acquisitions: l.GetAcquisitions(), Losses: l.GetLosses(), HandOvers: l.GetHandovers(), Fenced: l.GetFenced()}
	}
	if ls := r.GetLastStop(); ls != nil {
		st.LastStop = &status.Stop{Settled: ls.GetSettled(), Unsettled: ls.GetUnsettled(), LowWaterMark: ls.GetLowWaterMark(),
			Drained: ls.GetDrained(), Flushed: ls.GetFlushed(), Fenced: ls.GetFenced(), Released: ls.GetReleased(), LeaseLost: ls.GetLeaseLost(),
			HeldUpBy: ls.GetHeldUpBy(), Skipped: ls.GetSkipped(), Error: ls.GetError(), Took: ls.GetTook().AsDuration()}
	}
	if sn := r.GetSnapshot(); sn != nil {
		p := SnapshotOf(sn)
		st.Snapshot = &p
	}
	if sn := r.GetOnDemand(); sn != nil {
		p := SnapshotOf(sn)
		st.OnDemand = &p
	}
	return st
}

// RoleOf returns the name of the lease role r: RoleLeader, RoleStandby, or RoleIdle (also for
// an unset or unknown value).
func RoleOf(r messages.LeaseRole) string {
	switch r {
	case messages.LeaseRole_LEASE_ROLE_LEADER:
		return status.RoleLeader
	case messages.LeaseRole_LEASE_ROLE_STANDBY:
		return status.RoleStandby
	}
	return status.RoleIdle
}

// timeOf is ts as a time, the zero time when unset.
func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// SnapshotOf reads a snapshot status (StatusReply.snapshot, StatusReply.on_demand, and the
// reports the snapshot actors send their supervisor) into the shape the Observer events and
// Stream carry. A nil st gives the zero status.
func SnapshotOf(st *messages.SnapshotStatus) observe.SnapshotStatus {
	p := observe.SnapshotStatus{ID: st.GetSnapshotId(), Reason: st.GetReason(), Running: st.GetRunning(), Done: st.GetDone(),
		Resumed: st.GetResumed(), RangesDone: int(st.GetRangesDone()), RangesTotal: int(st.GetRangesTotal()),
		Documents: st.GetDocuments(), EstimatedTotal: st.GetEstimatedTotal(), DeadLettered: st.GetDeadLettered(),
		Rate: st.GetRate(), AtRisk: st.GetAtRisk(), Warning: st.GetWarning(), Error: st.GetError(),
		Phase: st.GetPhase(), ChunksDone: int(st.GetChunksDone()), Dropped: st.GetDropped()}
	if st.GetEta() != nil {
		p.ETA = st.GetEta().AsDuration()
	}
	if st.GetOplogWindow() != nil {
		p.OplogWindow = st.GetOplogWindow().AsDuration()
	}
	p.StartedAt, p.DoneAt = timeOf(st.GetStartedAt()), timeOf(st.GetDoneAt())
	return p
}
