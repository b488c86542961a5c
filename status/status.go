package status

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/observe"
)

// State is the lifecycle state of a stream, as its supervisor reports it. The names are those
// of the supervisor's logs and of StatusReply.transitions, and the console row's state.
type State string

// The states of a stream.
const (
	// Starting: the stream actor is (re)starting; its cursor is not open yet.
	Starting State = "starting"
	// Standby: waiting for leadership (SingleLeader); consumes nothing.
	Standby State = "standby"
	// Running: the cursor is open and events flow.
	Running State = "running"
	// Backoff: the stream died; a restart is scheduled (Stream.NextRetryAt).
	Backoff State = "backoff"
	// Stopped: stopped by an operator (Handle.Stop, the console) or by Runtime.Stop; also the
	// state of a stream whose supervisor is not running (its Why says so).
	Stopped State = "stopped"
	// Crashed: terminal failure or restart attempts exhausted; down until started again.
	Crashed State = "crashed"
	// Stopping: a graceful stop is under way (cursor closed, dispatcher draining, final
	// checkpoint being written); stopped follows.
	Stopping State = "stopping"
	// Snapshotting: the start position is fixed (persisted) and a snapshot copies the existing
	// documents through the handlers (Stream.Snapshot); running follows, from that position.
	Snapshotting State = "snapshotting"
	// Unknown is the state of a reply without one, or with a value this build does not know,
	// and the console's state of a stream whose supervisor did not answer.
	Unknown State = "unknown"
)

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

// The names of Stream.Mode: watchtree.Mode's names (Mode.String).
const (
	ModeAllInstances = "AllInstances"
	ModeSingleLeader = "SingleLeader"
)

// Stream is a snapshot of one stream, as its supervisor reports it, with what this instance
// knows of the stream besides (Local: its name, mode, cursor and warnings). Timestamps the
// supervisor left unset are the zero time.
type Stream struct {
	// Name is the stream's Name; Mode its deployment mode (ModeAllInstances or
	// ModeSingleLeader).
	Name string
	Mode string
	// Cursor is where the stream reads its events: "dedicated"; "shared (attached)" (the hub's
	// cursor) or "shared (catching up)" (a cursor of its own, from its own position) for a
	// Shared stream; "dedicated (<why>)" for a Shared stream that cannot share.
	// observe.CursorChanged reports each move.
	Cursor string
	// State is the lifecycle state; Why the one-line reason of the latest transition; Since when
	// it was entered (supervisor clock).
	State State
	Why   string
	Since time.Time
	// Attempt counts deaths since the last successful resubscription; MaxAttempts is the
	// RestartPolicy limit (0: unlimited). NextRetryAt is when the pending restart fires (zero
	// outside backoff).
	Attempt, MaxAttempts uint32
	NextRetryAt          time.Time
	// LastCause is the error of the latest death ("" if none).
	LastCause string
	// Incarnation numbers the stream actor's (re)starts since the tree was spawned, from 1.
	Incarnation uint64
	// Deaths and Restarts count deaths of the stream actor and restarts carried out by the
	// RestartPolicy since the tree was spawned.
	Deaths, Restarts uint64
	// Checkpoint is the resume token of the latest checkpoint written since the tree was spawned
	// (a copy; nil when none was written yet, or for a position that is an operation time),
	// CheckpointSource its source ("event", "pbrt", "initial", ...) and CheckpointAt when it was
	// written; time.Since(CheckpointAt) is the checkpoint age. The checkpointer reports its
	// writes at most every 100ms (the newest one of a faster run), so the status may be that much
	// behind the store; a Flush's write and the last write before a stop are reported at once.
	Checkpoint       bson.Raw
	CheckpointSource string
	CheckpointAt     time.Time
	// Settled counts the events settled since the tree was spawned, by outcome:
	// Handled + Filtered + Unhandled + Skipped + DeadLettered = Settled (DeadLettered includes
	// the events dropped with dead letters disabled). The dispatcher reports them at most every
	// 100ms, so the counts lag by at most 150ms (the report interval and a 50ms settlement
	// flush); a graceful stop reports them at once.
	Settled, Handled, Filtered, Unhandled, Skipped, DeadLettered uint64
	// LastStop reports the latest graceful stop; nil when the stream was never stopped.
	LastStop *Stop
	// Snapshot is the progress of the stream's latest snapshot since the tree was spawned; nil
	// when none ran. Snapshot documents are not counted in Settled and the outcomes above.
	Snapshot *observe.SnapshotStatus
	// OnDemand is the progress of the latest on-demand snapshot (Handle.Snapshot) since the tree
	// was spawned; nil when none ran. Its documents are not counted in Settled either.
	OnDemand *observe.SnapshotStatus
	// InFlight counts the events the dispatcher accepted and has not settled, as of its latest
	// report (at most every 100ms while events settle, and whenever the read position moved).
	InFlight uint64
	// ReadThrough is the cluster time of the newest position the stream has read: the last
	// event's, or that of an empty batch's post-batch resume token (the cursor is caught up to
	// it). Lag is now minus it. Zero before the first batch.
	ReadThrough time.Time
	// SettledThrough is the cluster time (seconds and increment) of the stream's settled
	// position, the resume position that never passes an unsettled event: every event with an
	// earlier cluster time has settled on this instance. It is reported at most every 50ms;
	// zero before the first report. Handle.AwaitCaughtUp waits for it.
	SettledThrough bson.Timestamp
	// Warnings are conditions the stream cannot see for itself, one line each; nil when none
	// holds. A Collection stream whose collection does not exist carries "namespace db.coll does
	// not exist ..." (checked at Spawn and every minute; observe.NamespaceMissing reports it too)
	// until a check finds it or the stream's first event settles. A Shared stream that keeps a
	// dedicated cursor carries "Cursor Shared: the stream reads on a dedicated cursor: <why>".
	Warnings []string
	// Lease is the SingleLeader lease as this instance sees it; nil for AllInstances streams.
	Lease *Lease
}

// Lease is a SingleLeader stream's lease as this instance sees it.
type Lease struct {
	// Role is RoleLeader, RoleStandby or RoleIdle.
	Role string
	// Instance is this instance's ID (Config.InstanceID); Owner the lease holder as last seen
	// ("" when free or unknown).
	Instance, Owner string
	// Epoch is the lease epoch as last seen (this instance's own when leader); ExpiresAt its
	// expiry (lease store clock; zero when unknown).
	Epoch     int64
	ExpiresAt time.Time
	// Why is the one-line reason of the role.
	Why string
	// Acquisitions, Losses, HandOvers and Fenced count this instance's leaderships won, lost,
	// handed over for balance, and writes refused by a newer epoch, since the tree was spawned.
	Acquisitions, Losses, HandOvers, Fenced uint64
}

// Stop tells how a graceful stop went.
type Stop struct {
	// Settled and Unsettled are the dispatcher's counts when its drain ended; unsettled events
	// are redelivered on the next start.
	Settled, Unsettled uint64
	// LowWaterMark is the highest sequence number the final checkpoint covers.
	LowWaterMark uint64
	// Drained and Flushed report whether the drain and the final checkpoint write completed.
	Drained, Flushed bool
	// Fenced reports a final write refused because another instance holds a newer lease epoch.
	Fenced bool
	// Released (SingleLeader) reports that the lease was released as the last step, so that a
	// standby could take over at once rather than at the lease's expiry.
	Released bool
	// LeaseLost (SingleLeader) reports that the lease was lost during the stop. Handling ended
	// at once: in-flight handler calls had their context cancelled, no queued event started, and
	// neither the rest of the drain nor the final checkpoint write ran (Drained and Flushed are
	// false); the unsettled events are the next leader's.
	LeaseLost bool
	// HeldUpBy names the first step that did not finish in time ("stream actor stop", "drain",
	// "checkpoint flush"); Skipped the steps left out because their actor had failed; Error the
	// first error of the sequence. All are empty after a clean stop.
	HeldUpBy, Skipped, Error string
	// Took is how long the stop sequence ran.
	Took time.Duration
}

// Failed reports whether the stop had an error (nil: no stop, so none).
func (s *Stop) Failed() bool { return s != nil && s.Error != "" }

// TimedOut reports whether the stop failed because a step did not finish in time (HeldUpBy
// names it): such a stop is reported as a timeout.
func (s *Stop) TimedOut() bool { return s.Failed() && s.HeldUpBy != "" }

// Lag is the stream's lag at now: now minus ReadThrough, never negative; ok is false before
// the first batch (ReadThrough unset).
func (s Stream) Lag(now time.Time) (lag time.Duration, ok bool) {
	if s.ReadThrough.IsZero() {
		return 0, false
	}
	return max(now.Sub(s.ReadThrough), 0), true
}

// Leads reports whether this instance holds the stream's lease (false for a stream without one).
func (s Stream) Leads() bool { return s.Lease != nil && s.Lease.Role == RoleLeader }

// RoleAllInstances is Role's name for an AllInstances stream, which has no lease.
const RoleAllInstances = "all-instances"

// Role is the stream's role on this instance, the one the metric adapters label it with:
// RoleAllInstances for an AllInstances stream; for a SingleLeader stream RoleStandby while it
// waits for the lease, else its lease's role (RoleLeader, RoleStandby or RoleIdle) and, when no
// lease is reported, RoleIdle if it is stopped or crashed here and RoleLeader otherwise. So an
// instance whose copy of the stream is down never counts as a leader (the no-leader alert sums
// the leader role over the instances).
func (s Stream) Role() string {
	switch {
	case s.Mode != ModeSingleLeader:
		return RoleAllInstances
	case s.State == Standby:
		return RoleStandby
	case s.Lease != nil && s.Lease.Role != "":
		return s.Lease.Role
	case s.State == Stopped || s.State == Crashed:
		return RoleIdle
	}
	return RoleLeader
}
