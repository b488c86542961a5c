package watchtree

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/streamstatus"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// StreamState is the lifecycle state of a stream, as its supervisor reports it.
type StreamState string

// The states of a stream, as its supervisor reports them.
const (
	// StateStarting: the stream actor is (re)starting; its cursor is not open yet.
	StateStarting StreamState = "starting"
	// StateStandby: waiting for leadership (SingleLeader); consumes nothing.
	StateStandby StreamState = "standby"
	// StateRunning: the cursor is open and events flow.
	StateRunning StreamState = "running"
	// StateBackoff: the stream died; a restart is scheduled (NextRetryAt).
	StateBackoff StreamState = "backoff"
	// StateStopped: stopped by an operator (Handle.Stop) or by Runtime.Stop.
	StateStopped StreamState = "stopped"
	// StateCrashed: terminal failure or restart attempts exhausted; down until Handle.Start.
	StateCrashed StreamState = "crashed"
	// StateStopping: a graceful stop is under way (cursor closed, dispatcher draining, final
	// checkpoint being written); stopped follows.
	StateStopping StreamState = "stopping"
	// StateSnapshotting: the start position is fixed (persisted) and a snapshot copies the
	// existing documents through the handlers (StreamStatus.Snapshot); running follows, from that
	// position.
	StateSnapshotting StreamState = "snapshotting"
)

// StreamStatus is a snapshot of one stream, as its supervisor reports it: the Go view of the
// supervisor's StatusReply message, which the Handle and the remote console share.
type StreamStatus struct {
	// Name is the stream's Name; Mode its deployment mode.
	Name string
	Mode Mode
	// Cursor is where the stream reads its events: "dedicated"; "shared (attached)" (the hub's
	// cursor) or "shared (catching up)" (a cursor of its own, from its own position) for a
	// Shared stream; "dedicated (<why>)" for a Shared stream that cannot share.
	// observe.CursorChanged reports each move.
	Cursor string
	// State is the lifecycle state; Why the one-line reason of the latest transition; Since when
	// it was entered.
	State StreamState
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
	// (nil when none was written yet, or for a position that is an operation time),
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
	LastStop *StopReport
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
	// it). time.Since(ReadThrough) is the stream's lag. Zero before the first batch.
	ReadThrough time.Time
	// SettledThrough is the cluster time (seconds and increment) of the stream's settled
	// position, the resume position that never passes an unsettled event: every event with an
	// earlier cluster time has settled on this instance. It is reported at most every 50ms;
	// zero before the first report. AwaitCaughtUp waits for it.
	SettledThrough bson.Timestamp
	// Warnings are conditions the stream cannot see for itself, one line each; nil when none
	// holds. A Collection stream whose collection does not exist carries "namespace db.coll does
	// not exist ..." (checked at Spawn and every minute; observe.NamespaceMissing reports it too)
	// until a check finds it or the stream's first event settles. A Shared stream that keeps a
	// dedicated cursor carries "Cursor Shared: the stream reads on a dedicated cursor: <why>".
	Warnings []string
	// Lease is the SingleLeader lease as this instance sees it; nil for AllInstances streams.
	Lease *LeaseStatus
}

// Lease roles of LeaseStatus.Role.
const (
	// RoleLeader: this instance holds the lease and runs the stream.
	RoleLeader = "leader"
	// RoleStandby: another instance holds the lease (or it could not be read); this one waits.
	RoleStandby = "standby"
	// RoleIdle: this instance does not campaign (the stream is stopped or crashed here).
	RoleIdle = "idle"
)

// LeaseStatus is a SingleLeader stream's lease as this instance sees it.
type LeaseStatus struct {
	// Role is RoleLeader, RoleStandby or RoleIdle.
	Role string
	// Instance is this instance's ID (Config.InstanceID); Owner the lease holder as last seen
	// ("" when free or unknown).
	Instance, Owner string
	// Epoch is the lease epoch as last seen (this instance's own when leader); ExpiresAt its
	// expiry (lease store clock).
	Epoch     int64
	ExpiresAt time.Time
	// Why is the one-line reason of the role.
	Why string
	// Acquisitions, Losses, HandOvers and Fenced count this instance's leaderships won, lost,
	// handed over for balance, and writes refused by a newer epoch, since the tree was spawned.
	Acquisitions, Losses, HandOvers, Fenced uint64
}

// StopReport tells how a graceful stop went.
type StopReport struct {
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

// statusOf converts the supervisor's reply, as internal/streamstatus reads it (the console reads
// it there too); a nil reply (the supervisor never answered) is a stopped stream.
func statusOf(e *engine.Entry, r *messages.StatusReply) StreamStatus {
	if r == nil {
		return StreamStatus{Name: e.Name(), Mode: modeOf(e.Spec()), State: StateStopped, Why: "the stream's supervisor is not running"}
	}
	s := streamstatus.Read(r)
	st := StreamStatus{
		Name: s.Stream, Mode: modeOf(e.Spec()), Cursor: e.CursorMode(), State: StreamState(s.State), Why: s.Why, Since: s.Since,
		Attempt: s.Attempt, MaxAttempts: s.MaxAttempts, NextRetryAt: s.NextRetryAt, LastCause: s.LastCause,
		Incarnation: s.Incarnation, Deaths: s.Deaths, Restarts: s.Restarts,
		Settled: s.Settled.Settled, Handled: s.Settled.Handled, Filtered: s.Settled.Filtered,
		Unhandled: s.Settled.Unhandled, Skipped: s.Settled.Skipped, DeadLettered: s.Settled.DeadLettered,
		InFlight: s.InFlight, ReadThrough: s.ReadThrough, SettledThrough: s.SettledThrough,
		Warnings: s.Warnings,
	}
	if why := e.SharedWhy(); why != "" {
		st.Warnings = append(st.Warnings, "Cursor Shared: the stream reads on a dedicated cursor: "+why)
	}
	if cp := s.Checkpoint; cp != nil {
		st.Checkpoint, st.CheckpointSource, st.CheckpointAt = cp.Token, cp.Source, cp.WrittenAt
	}
	if l := s.Lease; l != nil {
		st.Lease = &LeaseStatus{Role: l.Role, Instance: l.Instance, Owner: l.Holder, Epoch: l.Epoch, ExpiresAt: l.ExpiresAt,
			Why: l.Why, Acquisitions: l.Acquisitions, Losses: l.Losses, HandOvers: l.HandOvers, Fenced: l.Fenced}
	}
	if ls := s.LastStop; ls != nil {
		st.LastStop = &StopReport{
			Settled: ls.Settled, Unsettled: ls.Unsettled, LowWaterMark: ls.LowWaterMark,
			Drained: ls.Drained, Flushed: ls.Flushed, Fenced: ls.Fenced, Released: ls.Released, LeaseLost: ls.LeaseLost,
			HeldUpBy: ls.HeldUpBy, Skipped: ls.Skipped, Error: ls.Error, Took: ls.Took,
		}
	}
	if sn := r.GetSnapshot(); sn != nil {
		p := streamstatus.SnapshotOf(sn)
		st.Snapshot = &p
	}
	if sn := r.GetOnDemand(); sn != nil {
		p := streamstatus.SnapshotOf(sn)
		st.OnDemand = &p
	}
	return st
}

// Handle controls one spawned stream. It is safe for concurrent use.
type Handle struct{ e *engine.Entry }

// Name returns the stream's Name.
func (h *Handle) Name() string { return h.e.Name() }

// Status asks the stream's supervisor for its current status (one actor round trip, bounded
// by ctx; 5s when ctx has no deadline). Once the runtime has stopped, it returns the last
// status the supervisor reported.
func (h *Handle) Status(ctx context.Context) (StreamStatus, error) {
	r, err := h.e.Status(ctx)
	if err != nil {
		return StreamStatus{}, err
	}
	return statusOf(h.e, r), nil
}

// Stop stops the stream gracefully and waits for it, bounded by ctx and Config.ShutdownTimeout
// (the earlier). The stream's supervisor runs the sequence: the stream actor stops (its cursor
// is closed, no more events are read), the dispatcher drains (in-flight events finish, retries
// and dead-letter writes included, and settle; later ones are left for the next start), and the
// checkpointer writes the final position. Nothing settled before the stop is redelivered after
// it. The stream stays registered in state stopped; Start resumes it from that position.
// Stopping a stopped stream returns nil. A SingleLeader stream then releases its lease, so a
// standby instance takes over at once, from that position.
//
// The same sequence runs for a stream spawned through Props, and for a Stop message sent to
// the supervisor by any other actor. When a step does not finish in time, Stop returns an error
// matching context.DeadlineExceeded that names the step (Status().LastStop has the details);
// the events left unsettled are redelivered on the next start.
func (h *Handle) Stop(ctx context.Context) error { return h.e.Stop(ctx, "handle") }

// Start starts a stopped or crashed stream and, like Spawn, returns once its cursor is open
// (bounded by ctx; 30s without a deadline): it resumes after its checkpoint (Latest and At
// start positions apply to the first start after Spawn only). Starting a stream that is up
// (starting, running, backoff) is a no-op, except that during backoff the pending restart
// happens now (an operator start wins over the RestartPolicy's delay) and the attempt counter
// resets. During a graceful stop it is ignored: start again once Stop returned. A stream that
// crashes while starting returns its cause; one still in backoff when ctx ends returns an error
// naming the last cause, and its RestartPolicy goes on. A SingleLeader stream campaigns for its
// lease: Start returns once it runs (it acquired the lease) or is in standby (another instance
// leads).
func (h *Handle) Start(ctx context.Context) error {
	return h.e.Command(ctx, &messages.Start{Reason: "handle"})
}

// Restart closes the stream's cursor and opens a new one, and resets the attempt counter. A
// stream that is up restarts gracefully, as Stop does (the dispatcher drains, the final
// checkpoint is written; a SingleLeader stream keeps its lease), and the new cursor resumes
// from that checkpoint: nothing handled before the restart is delivered again. An event still
// unsettled after the stop timeout (30s) is redelivered. A stream in backoff, stopped or
// crashed is started at once. Restart returns once the new cursor is open, as Start does
// (bounded by ctx; 30s without a deadline); during a graceful stop it is ignored.
func (h *Handle) Restart(ctx context.Context) error {
	return h.e.Command(ctx, &messages.Restart{Reason: "handle"})
}
