package watchtree

import (
	"context"

	"github.com/watchtree/watchtree/internal/engine"
)

// ErrStandby means a SingleLeader stream is in standby on this instance: another instance holds
// the lease and processes the events, so this one settles nothing (Handle.AwaitCaughtUp). An
// error matching it also matches ErrStreamNotRunning.
var ErrStandby = engine.ErrStandby

// AwaitCaughtUp returns nil once every event committed before the call has settled on this
// instance: handled, filtered, without a handler, skipped or dead-lettered. It reads the
// server's cluster time first (the operationTime of a ping on the stream's client, a BSON
// timestamp at full precision: seconds and increment), then waits until the stream's settled
// position (its resume position, which never passes an unsettled event: the last settled
// event's token, or a post-batch resume token once everything before it settled) has a later
// cluster time; StreamStatus.SettledThrough shows it. A quiet stream returns too: its position
// moves with the post-batch resume tokens of its empty batches. Against a real replica set that
// is with the next oplog entry, which an idle primary writes at least every 10 seconds (its
// periodic no-op); mongosim's tokens move at once. Events skipped by a recorded gap
// (OnHistoryLost other than Fail) count as passed; the gap record names them.
//
// It is the "ready after catch-up" check, and what a test calls after its writes instead of
// polling Status().Handled: the handler effects of those writes are visible when it returns.
// The wait reacts to the position within 50ms (the checkpointer's report interval).
//
// Errors (match with errors.Is):
//   - ctx's error (context.DeadlineExceeded, context.Canceled) when ctx ends first; without a
//     deadline the wait is bounded by 30s, then it matches context.DeadlineExceeded;
//   - ErrStandby (and ErrStreamNotRunning) at once for a SingleLeader stream in standby here,
//     or when it enters standby while waiting (it lost the lease);
//   - ErrStreamNotRunning when the stream is stopped or crashed here, at the call or while
//     waiting (a graceful Stop during the wait ends it so: once the cursor is closed no
//     post-batch resume token can carry the position past the last event read);
//   - ErrStopped / ErrNotStarted when the runtime is not running; the driver's error when the
//     cluster time cannot be read.
//
// While the stream starts, backs off, snapshots or stops, the wait goes on.
func (h *Handle) AwaitCaughtUp(ctx context.Context) error { return h.e.AwaitCaughtUp(ctx) }
