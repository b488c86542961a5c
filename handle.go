package watchtree

import (
	"context"

	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/status"
)

// StreamState is the lifecycle state of a stream, as its supervisor reports it (status.State).
type StreamState = status.State

// The states of a stream, as its supervisor reports them: package status declares and
// documents them.
const (
	StateStarting     = status.Starting
	StateStandby      = status.Standby
	StateRunning      = status.Running
	StateBackoff      = status.Backoff
	StateStopped      = status.Stopped
	StateCrashed      = status.Crashed
	StateStopping     = status.Stopping
	StateSnapshotting = status.Snapshotting
)

// StreamStatus is a snapshot of one stream, as its supervisor reports it (Handle.Status): the
// status type of package status, which the console's rows and the watchtree CLI's JSON are
// built from too. Its Mode is the name of the stream's Mode (Mode.String).
type StreamStatus = status.Stream

// Lease roles of LeaseStatus.Role (package status declares them).
const (
	RoleLeader  = status.RoleLeader
	RoleStandby = status.RoleStandby
	RoleIdle    = status.RoleIdle
)

// LeaseStatus is a SingleLeader stream's lease as this instance sees it (StreamStatus.Lease).
type LeaseStatus = status.Lease

// StopReport tells how a graceful stop went (StreamStatus.LastStop).
type StopReport = status.Stop

// Handle controls one spawned stream. It is safe for concurrent use.
type Handle struct{ e *engine.Entry }

// Name returns the stream's Name.
func (h *Handle) Name() string { return h.e.Name() }

// Status asks the stream's supervisor for its current status (one actor round trip, bounded
// by ctx; 5s when ctx has no deadline), read from the supervisor's reply by the one reader the
// console uses too. Once the runtime has stopped, it returns the last status the supervisor
// reported; a stream whose supervisor never answered is stopped, with the reason "the stream's
// supervisor is not running".
func (h *Handle) Status(ctx context.Context) (StreamStatus, error) {
	r, err := h.e.Status(ctx)
	if err != nil {
		return StreamStatus{}, err
	}
	return statusx.Read(r, h.e.Local()), nil
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
