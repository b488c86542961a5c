// Package streamstatus reads a stream supervisor's StatusReply (package messages) into Go values:
// the one reading of that message, shared by the runtime's Handle (watchtree.StreamStatus) and
// the console (its stream rows and command replies), so that a field means the same on both
// sides: the state's name, which lease role counts as leading, that dead-lettered includes the
// events dropped with dead letters disabled, what an unset timestamp is, when a stop failed or
// timed out. Snapshot progress is read on its own (SnapshotOf), into observe.SnapshotStatus: the
// Handle shows it, and the snapshot actors report it in their Observer events.
package streamstatus

import (
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// The state names of Status.State, as the supervisor's states are called in logs and in
// StatusReply.transitions.
const (
	Starting     = "starting"
	Standby      = "standby"
	Running      = "running"
	Backoff      = "backoff"
	Stopped      = "stopped"
	Crashed      = "crashed"
	Stopping     = "stopping"
	Snapshotting = "snapshotting"
	// Unknown is the state of a reply without one, or with a value this build does not know.
	Unknown = "unknown"
)

var stateNames = map[messages.SupervisorState]string{
	messages.SupervisorState_SUPERVISOR_STATE_STARTING:     Starting,
	messages.SupervisorState_SUPERVISOR_STATE_STANDBY:      Standby,
	messages.SupervisorState_SUPERVISOR_STATE_RUNNING:      Running,
	messages.SupervisorState_SUPERVISOR_STATE_BACKOFF:      Backoff,
	messages.SupervisorState_SUPERVISOR_STATE_STOPPED:      Stopped,
	messages.SupervisorState_SUPERVISOR_STATE_CRASHED:      Crashed,
	messages.SupervisorState_SUPERVISOR_STATE_STOPPING:     Stopping,
	messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING: Snapshotting,
}

// StateName returns the name of s (one of the constants above; Unknown for an unset or
// unknown value).
func StateName(s messages.SupervisorState) string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return Unknown
}

// The lease roles of Lease.Role.
const (
	// RoleLeader: this instance holds the lease and runs the stream.
	RoleLeader = "leader"
	// RoleStandby: another instance holds the lease (or it could not be read); this one waits.
	RoleStandby = "standby"
	// RoleIdle: this instance does not campaign (the stream is stopped or crashed here); also
	// the role of a lease state without one.
	RoleIdle = "idle"
)

// Status is one StatusReply. Timestamps the reply leaves unset are the zero time.
type Status struct {
	// Stream is the stream's name; State its state's name (StateName); Why the one-line reason
	// of the latest transition; Since when it was entered (supervisor clock).
	Stream, State, Why string
	Since              time.Time
	// Attempt counts deaths since the last successful resubscription; MaxAttempts is the
	// restart policy's limit (0: unlimited); NextRetryAt when the pending restart fires (zero
	// outside backoff); LastCause the error of the latest death ("" if none).
	Attempt, MaxAttempts uint32
	NextRetryAt          time.Time
	LastCause            string
	// Incarnation numbers the stream actor's (re)starts from 1; Deaths and Restarts count its
	// deaths and the restarts the policy carried out, since the supervisor started.
	Incarnation, Deaths, Restarts uint64
	// Checkpoint is the latest checkpoint written since the supervisor started; nil when none.
	Checkpoint *Checkpoint
	// Settled counts the settled events by outcome, since the supervisor started.
	Settled Settlements
	// InFlight counts the events the dispatcher accepted and has not settled, as of its latest
	// report. ReadThrough is the cluster time of the newest position the stream has read (zero
	// before the first batch): now minus it is the stream's lag (Lag).
	InFlight    uint64
	ReadThrough time.Time
	// SettledThrough is the cluster time of the settled position, as the checkpointer last
	// reported it: every event before it has settled. Zero before the first report.
	SettledThrough bson.Timestamp
	// Warnings are the conditions the supervisor was told of that an operator should see (a
	// Collection stream's collection that does not exist); nil when none holds.
	Warnings []string
	// Lease is a SingleLeader stream's lease as this instance sees it; nil for AllInstances.
	Lease *Lease
	// LastStop reports the latest graceful stop; nil when there was none.
	LastStop *Stop
}

// Checkpoint is the latest checkpoint written.
type Checkpoint struct {
	// Token is the resume token written (a copy; nil for an operation-time position), Source
	// its source ("event", "pbrt", "initial", ...), WrittenAt when it was written.
	Token     bson.Raw
	Source    string
	WrittenAt time.Time
}

// Settlements counts settled events by outcome: Handled + Filtered + Unhandled + Skipped +
// DeadLettered = Settled.
type Settlements struct {
	// Settled is the total; Handled, Filtered, Unhandled and Skipped count by outcome.
	Settled, Handled, Filtered, Unhandled, Skipped uint64
	// DeadLettered counts the events whose attempts ran out: their dead letter was written, or
	// they were dropped with dead letters disabled.
	DeadLettered uint64
}

// Lease is the leader actor's view of a stream's lease.
type Lease struct {
	// Role is RoleLeader, RoleStandby or RoleIdle.
	Role string
	// Instance is this instance's ID; Holder the lease holder as last seen ("" when free or
	// unknown); Epoch the lease's epoch as last seen (this instance's own when leader);
	// ExpiresAt its expiry (lease store clock; zero when unknown); Why the reason of the role.
	Instance, Holder string
	Epoch            int64
	ExpiresAt        time.Time
	Why              string
	// Acquisitions, Losses, HandOvers and Fenced count leaderships won, lost, handed over, and
	// writes refused by a newer epoch, since the supervisor started.
	Acquisitions, Losses, HandOvers, Fenced uint64
}

// Stop is the report of a graceful stop.
type Stop struct {
	// Settled and Unsettled are the dispatcher's counts when its drain ended; LowWaterMark the
	// highest sequence number the final checkpoint covers.
	Settled, Unsettled, LowWaterMark uint64
	// Drained and Flushed: the drain and the final checkpoint write completed. Fenced: the final
	// write was refused by a newer lease epoch. Released: the lease was released as the last step.
	// LeaseLost: the lease was lost during the stop, and handling ended at once.
	Drained, Flushed, Fenced, Released, LeaseLost bool
	// HeldUpBy names the first step that did not finish within the stop's timeout; Skipped the
	// steps left out; Error the first error of the sequence. All empty after a clean stop.
	HeldUpBy, Skipped, Error string
	// Took is how long the sequence ran.
	Took time.Duration
}

// Failed reports whether the stop had an error (nil: no stop, so none).
func (s *Stop) Failed() bool { return s != nil && s.Error != "" }

// TimedOut reports whether the stop failed because a step did not finish in time (HeldUpBy
// names it): such a stop is reported as a timeout.
func (s *Stop) TimedOut() bool { return s.Failed() && s.HeldUpBy != "" }

// Read reads r; a nil r reads as an empty reply (state Unknown).
func Read(r *messages.StatusReply) Status {
	st := Status{
		Stream: r.GetStream(), State: StateName(r.GetState()), Why: r.GetWhy(), Since: timeOf(r.GetSince()),
		Attempt: r.GetAttempt(), MaxAttempts: r.GetMaxAttempts(), NextRetryAt: timeOf(r.GetNextRetryAt()),
		LastCause: r.GetLastCause(), Incarnation: r.GetIncarnation(), Deaths: r.GetDeaths(), Restarts: r.GetRestarts(),
		InFlight: r.GetInFlight(), ReadThrough: timeOf(r.GetReadThrough()),
		SettledThrough: bson.Timestamp{T: r.GetSettledThrough().GetSeconds(), I: r.GetSettledThrough().GetIncrement()},
		Warnings:       slices.Clone(r.GetWarnings()),
	}
	if cp := r.GetCheckpoint(); cp != nil {
		st.Checkpoint = &Checkpoint{Source: cp.GetSource(), WrittenAt: timeOf(cp.GetWrittenAt())}
		if len(cp.GetToken()) > 0 {
			st.Checkpoint.Token = append(bson.Raw(nil), cp.GetToken()...)
		}
	}
	c := r.GetSettlements()
	st.Settled = Settlements{Settled: c.GetSettled(), Handled: c.GetHandled(), Filtered: c.GetFiltered(),
		Unhandled: c.GetUnhandled(), Skipped: c.GetSkipped(), DeadLettered: c.GetDeadLettered() + c.GetDropped()}
	if l := r.GetLease(); l != nil {
		st.Lease = &Lease{Role: roleName(l.GetRole()), Instance: l.GetOwner(), Holder: l.GetHolder(), Epoch: l.GetEpoch(),
			ExpiresAt: timeOf(l.GetExpiresAt()), Why: l.GetWhy(),
			Acquisitions: l.GetAcquisitions(), Losses: l.GetLosses(), HandOvers: l.GetHandovers(), Fenced: l.GetFenced()}
	}
	if ls := r.GetLastStop(); ls != nil {
		st.LastStop = &Stop{Settled: ls.GetSettled(), Unsettled: ls.GetUnsettled(), LowWaterMark: ls.GetLowWaterMark(),
			Drained: ls.GetDrained(), Flushed: ls.GetFlushed(), Fenced: ls.GetFenced(), Released: ls.GetReleased(), LeaseLost: ls.GetLeaseLost(),
			HeldUpBy: ls.GetHeldUpBy(), Skipped: ls.GetSkipped(), Error: ls.GetError(), Took: ls.GetTook().AsDuration()}
	}
	return st
}

// Lag is the stream's lag at now: now minus ReadThrough, never negative; ok is false before
// the first batch (ReadThrough unset).
func (s Status) Lag(now time.Time) (lag time.Duration, ok bool) {
	if s.ReadThrough.IsZero() {
		return 0, false
	}
	return max(now.Sub(s.ReadThrough), 0), true
}

// Leads reports whether this instance holds the stream's lease (false for a stream without one).
func (s Status) Leads() bool { return s.Lease != nil && s.Lease.Role == RoleLeader }

func roleName(r messages.LeaseRole) string {
	switch r {
	case messages.LeaseRole_LEASE_ROLE_LEADER:
		return RoleLeader
	case messages.LeaseRole_LEASE_ROLE_STANDBY:
		return RoleStandby
	}
	return RoleIdle
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
// watchtree.StreamStatus carry. A nil st gives the zero status.
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
	if st.GetStartedAt() != nil {
		p.StartedAt = st.GetStartedAt().AsTime()
	}
	if st.GetDoneAt() != nil {
		p.DoneAt = st.GetDoneAt().AsTime()
	}
	return p
}
