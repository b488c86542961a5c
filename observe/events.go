package observe

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Started reports that the stream's cursor is open and events flow. The stream actor reports
// it.
type Started struct {
	Meta
	// Position says where it started: "checkpoint", "initial", "latest", "at", "after-invalidate",
	// "after-gap", or "migrated" (an AllInstances instance's first start from the stream's
	// shared checkpoint of an earlier version). An Ephemeral stream starts "latest".
	Position string
}

// Stopped reports that the stream stopped, gracefully or by a crash. The supervisor reports it.
type Stopped struct {
	Meta
	Reason StopReason // Graceful or Crashed
	// Cause is nil for a graceful stop; for a crash it is the error, matching
	// watchtree.ErrGaveUp, ErrHistoryLost, ErrInvalidated or ErrFenced with errors.Is when
	// terminal, or carrying the server's error (a mongo.ServerError) when the server refused
	// what no restart can fix.
	Cause error
	// Terminal is true when the stream stays down until an operator starts it.
	Terminal bool
	// Attempt and RestartIn describe the supervisor's backoff after a crash that is not
	// terminal: the stream's RestartPolicy schedules restart attempt Attempt (1-based, counted
	// since the last successful start) RestartIn from Time. Both are zero for a graceful or a
	// terminal stop. A Restarted event follows when the attempt succeeds; a failed attempt is
	// reported as another Stopped with the next Attempt and its longer delay.
	Attempt   int
	RestartIn time.Duration
}

// Restarted reports a successful restart by the supervisor after a crash.
type Restarted struct {
	Meta
	// Attempt is the 1-based restart attempt that succeeded.
	Attempt int
	// Cause is the error of the crash that led to the restart.
	Cause error
}

// RetryScheduled reports that a handler failed and the event will be retried. The dispatcher
// reports it.
type RetryScheduled struct {
	Meta
	// EventID is the event's ID().
	EventID string
	// Attempt is the 1-based attempt that failed.
	Attempt int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Err is the handler's error.
	Err error
}

// Skipped reports an event settled on purpose, without a retry or a dead letter. The
// dispatcher reports it.
type Skipped struct {
	Meta
	EventID string // the event's ID (Event.ID)
	// Reason is the rule that skipped the event (SkipByHandler: the handler returned
	// watchtree.Skip).
	Reason SkipReason
	// Detail is what the rule gave: for SkipByHandler, the reason passed to watchtree.Skip.
	Detail string
}

// DeadLettered reports an event that exhausted its attempts or failed permanently, and whose
// dead-letter record is durably written (or dropped, when dead letters are disabled). The
// dispatcher reports it.
type DeadLettered struct {
	Meta
	EventID string // the event's ID (Event.ID), the dead letter's key
	// OperationType is the event's operation type as the server spells it (a
	// watchtree.OperationType value: "insert", "update", ...), empty when it did not decode.
	OperationType string
	// Attempts is the number of handler calls made (0 for a decode error).
	Attempts int
	// Err is the final error.
	Err error
	// Dropped is true when DeadLetter.Disabled: nothing was written and the event is lost.
	Dropped bool
}

// DeadLetterFailed reports a failed dead-letter write. The event stays unsettled and the write
// is retried; the checkpoint does not pass it. The dispatcher reports it.
type DeadLetterFailed struct {
	Meta
	EventID string // the event's ID (Event.ID)
	Err     error  // the store's error
}

// Checkpointed reports a durable checkpoint write. The checkpointer reports it.
type Checkpointed struct {
	Meta
	// Token is the resume token written.
	Token bson.Raw
	// Settled is the number of settlements this write covers (0 for an idle-token write or a
	// write of a new start position).
	Settled int
}

// CheckpointFailed reports a failed checkpoint write. The progress stays due and is retried;
// processing goes on up to CheckpointPolicy.MaxUnflushed unwritten settlements. The
// checkpointer reports it.
type CheckpointFailed struct {
	Meta
	Err error // the store's error
	// Unflushed is the number of settled events not yet written.
	Unflushed int
}

// CheckpointRefused reports a checkpoint write that the store refused because its position
// sorts before the one stored under the same epoch (store.ErrBackward): a late write of an
// earlier incarnation, delivered after a newer one, or a post-batch token that sorts before the
// event before it. The stored position stands, the stream goes on, and the next write past it
// succeeds: a position never moves backward, so no refusal widens the redelivery window. The
// checkpointer reports it, once per refused write.
type CheckpointRefused struct {
	Meta
	// Token is the resume token of the position refused (nil for one known only by its cluster
	// time).
	Token bson.Raw
	// Err is the store's error, which names both positions; it matches store.ErrBackward.
	Err error
}

// HistoryLost reports that the saved position is no longer in the oplog, and which
// OnHistoryLost policy applies. The checkpointer reports it.
type HistoryLost struct {
	Meta
	// Policy names the OnHistoryLost policy that applies: "Fail", "ResumeFromNow", "Rebuild" or
	// "RebuildFromSnapshot" (watchtree.HistoryLostPolicy's String). It is the name, not the
	// policy, because an event is for logs, metrics and alerts, which need the name, and because
	// this package cannot name the root's types (the root imports it).
	Policy string
	// Err is the server's error (ChangeStreamHistoryLost 286, ChangeStreamFatalError 280 or
	// CappedPositionLost 136), matching watchtree.ErrHistoryLost.
	Err error
}

// GapRecorded reports a durable gap record: events between From and To were never delivered.
// The checkpointer reports it.
type GapRecorded struct {
	Meta
	// From is the last position known good (the lost token); To is the new start position.
	From, To bson.Raw
	// Policy names the OnHistoryLost policy that wrote the gap, as HistoryLost.Policy does.
	Policy string
}

// Invalidated reports an invalidate event and the path taken. The stream actor reports it.
type Invalidated struct {
	Meta
	// Cause is the operation that invalidated the stream: "drop", "rename" or "dropDatabase"
	// (empty when the server sent the invalidate alone).
	Cause string
	// Action names the stream's OnInvalidate policy, what the stream does next:
	// "InvalidateRestart" (it reopens after the invalidate) or "InvalidateStop" (it stops
	// terminally), watchtree.InvalidatePolicy's String; a name, as HistoryLost.Policy is.
	Action string
}

// LeadershipChanged reports a change of a SingleLeader stream's leadership on this instance:
// acquired, lost, released, handed over for balance, or fenced (Change). The leader actor
// reports it.
type LeadershipChanged struct {
	Meta
	// Leader is true when this instance now leads the stream (Change LeadershipAcquired).
	Leader bool
	// Change says what happened.
	Change LeadershipChange
	// Instance is this instance's ID (watchtree.Config.InstanceID).
	Instance string
	// Owner is the instance ID holding the lease as last seen (empty when unknown or free).
	Owner string
	// Epoch is the lease epoch concerned; it increments on every acquisition.
	Epoch int64
	// ExpiresAt is the lease's expiry (lease store clock) when known.
	ExpiresAt time.Time
	// Why is the reason of a loss or a fencing.
	Why string
}

// SnapshotStarted reports that a new snapshot planned its ranges and reads its first documents
// (or, for an on-demand snapshot, that it started). The snapshot actor reports it.
type SnapshotStarted struct {
	Meta
	Snapshot SnapshotStatus // the snapshot's status at that moment
}

// SnapshotResumed reports that a run continues a snapshot an earlier run had begun (after a
// restart or a crash): finished ranges are not read again, the others resume after their last
// document done.
type SnapshotResumed struct {
	Meta
	Snapshot SnapshotStatus // the snapshot's status at that moment
}

// SnapshotProgress reports a running snapshot's progress, every second (an on-demand
// snapshot: every chunk), and at once when its handoff position becomes at risk of leaving the
// oplog before it ends (Snapshot.AtRisk).
type SnapshotProgress struct {
	Meta
	Snapshot SnapshotStatus // the snapshot's status at that moment
}

// SnapshotDone reports that every range of the snapshot is done; the change stream opens from
// the snapshot's handoff position next. An on-demand snapshot that ended (done, failed or
// abandoned: Snapshot.Phase) reports it too.
type SnapshotDone struct {
	Meta
	Snapshot SnapshotStatus // the snapshot's status at that moment
}

// NamespaceMissing warns that a Collection stream watches a collection that does not exist:
// its change stream opens and stays silent (running, a healthy lag) until the collection is
// created, so a wrong Collection or Database name looks like a quiet one. The runtime checks
// at Spawn and then every minute while the stream is spawned, and reports it each time the
// collection is still missing; StreamStatus.Warnings holds the same note until a check finds
// it or an event settles. The log, unlike this event, says it once per change.
type NamespaceMissing struct {
	Meta
	// Namespace is "database.collection".
	Namespace string
	// Since is when the runtime first found it missing (runtime clock).
	Since time.Time
}

// CursorChanged reports a Shared stream (watchtree.Stream.Cursor Shared) moving between the
// hub's cursor and a cursor of its own. Attached: it caught up from its own position and now
// reads the events the hub routes to it. Detached: it reads a cursor of its own again, from its
// own position, until it is level with the hub (its buffer of routed events filled up because
// it read too slowly, the hub's cursor failed, or its collection was dropped or renamed). Its
// position, checkpoint and delivery are the same either way; only the cursor differs. The
// stream's reader reports it, once per change.
type CursorChanged struct {
	Meta
	// Attached is true when the stream now reads from the hub's cursor.
	Attached bool
	// Why says what moved it, in a few words ("level with the shared cursor", "its buffer of
	// 8192 events is full", ...).
	Why string
}

// The sealing methods: only the types below are Events (embedding Meta is not enough).
func (Started) event()           {}
func (Stopped) event()           {}
func (Restarted) event()         {}
func (RetryScheduled) event()    {}
func (Skipped) event()           {}
func (DeadLettered) event()      {}
func (DeadLetterFailed) event()  {}
func (Checkpointed) event()      {}
func (CheckpointFailed) event()  {}
func (CheckpointRefused) event() {}
func (HistoryLost) event()       {}
func (GapRecorded) event()       {}
func (Invalidated) event()       {}
func (LeadershipChanged) event() {}
func (SnapshotStarted) event()   {}
func (SnapshotResumed) event()   {}
func (SnapshotProgress) event()  {}
func (SnapshotDone) event()      {}
func (NamespaceMissing) event()  {}
func (CursorChanged) event()     {}

// Kind returns KindStarted.
func (Started) Kind() Kind { return KindStarted }

// Kind returns KindStopped.
func (Stopped) Kind() Kind { return KindStopped }

// Kind returns KindRestarted.
func (Restarted) Kind() Kind { return KindRestarted }

// Kind returns KindRetryScheduled.
func (RetryScheduled) Kind() Kind { return KindRetryScheduled }

// Kind returns KindSkipped.
func (Skipped) Kind() Kind { return KindSkipped }

// Kind returns KindDeadLettered.
func (DeadLettered) Kind() Kind { return KindDeadLettered }

// Kind returns KindDeadLetterFailed.
func (DeadLetterFailed) Kind() Kind { return KindDeadLetterFailed }

// Kind returns KindCheckpointed.
func (Checkpointed) Kind() Kind { return KindCheckpointed }

// Kind returns KindCheckpointFailed.
func (CheckpointFailed) Kind() Kind { return KindCheckpointFailed }

// Kind returns KindCheckpointRefused.
func (CheckpointRefused) Kind() Kind { return KindCheckpointRefused }

// Kind returns KindHistoryLost.
func (HistoryLost) Kind() Kind { return KindHistoryLost }

// Kind returns KindGapRecorded.
func (GapRecorded) Kind() Kind { return KindGapRecorded }

// Kind returns KindInvalidated.
func (Invalidated) Kind() Kind { return KindInvalidated }

// Kind returns KindLeadershipChanged.
func (LeadershipChanged) Kind() Kind { return KindLeadershipChanged }

// Kind returns KindSnapshotStarted.
func (SnapshotStarted) Kind() Kind { return KindSnapshotStarted }

// Kind returns KindSnapshotResumed.
func (SnapshotResumed) Kind() Kind { return KindSnapshotResumed }

// Kind returns KindSnapshotProgress.
func (SnapshotProgress) Kind() Kind { return KindSnapshotProgress }

// Kind returns KindSnapshotDone.
func (SnapshotDone) Kind() Kind { return KindSnapshotDone }

// Kind returns KindNamespaceMissing.
func (NamespaceMissing) Kind() Kind { return KindNamespaceMissing }

// Kind returns KindCursorChanged.
func (CursorChanged) Kind() Kind { return KindCursorChanged }

// String describes the event in one line, as the runtime logs it.
func (e Started) String() string {
	return fmt.Sprintf("stream %s started from %s", e.Stream, e.Position)
}

// String describes the event in one line, as the runtime logs it.
func (e Stopped) String() string {
	s := fmt.Sprintf("stream %s stopped (%s)", e.Stream, e.Reason)
	if e.Terminal {
		s += ", terminal"
	}
	if e.Attempt > 0 {
		s += fmt.Sprintf(", restart attempt %d in %v", e.Attempt, e.RestartIn)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// String describes the event in one line, as the runtime logs it.
func (e Restarted) String() string {
	return fmt.Sprintf("stream %s restarted (attempt %d) after: %v", e.Stream, e.Attempt, e.Cause)
}

// String describes the event in one line, as the runtime logs it.
func (e RetryScheduled) String() string {
	return fmt.Sprintf("stream %s: event %s attempt %d failed, retry in %v: %v", e.Stream, e.EventID, e.Attempt, e.Delay, e.Err)
}

// String describes the event in one line, as the runtime logs it.
func (e Skipped) String() string {
	return fmt.Sprintf("stream %s: event %s skipped: %s", e.Stream, e.EventID, e.Detail)
}

// String describes the event in one line, as the runtime logs it.
func (e DeadLettered) String() string {
	verb := "dead-lettered"
	if e.Dropped {
		verb = "dropped (dead letters disabled)"
	}
	return fmt.Sprintf("stream %s: %s event %s %s after %d attempts: %v", e.Stream, e.OperationType, e.EventID, verb, e.Attempts, e.Err)
}

// String describes the event in one line, as the runtime logs it.
func (e DeadLetterFailed) String() string {
	return fmt.Sprintf("stream %s: dead-letter write for event %s failed, will retry: %v", e.Stream, e.EventID, e.Err)
}

// String describes the event in one line, as the runtime logs it.
func (e Checkpointed) String() string {
	return fmt.Sprintf("stream %s: checkpoint written (%d settled)", e.Stream, e.Settled)
}

// String describes the event in one line, as the runtime logs it.
func (e CheckpointFailed) String() string {
	return fmt.Sprintf("stream %s: checkpoint write failed (%d unflushed), will retry: %v", e.Stream, e.Unflushed, e.Err)
}

// String describes the event in one line, as the runtime logs it.
func (e CheckpointRefused) String() string {
	return fmt.Sprintf("stream %s: checkpoint write refused, the stored position stands: %v", e.Stream, e.Err)
}

// String describes the event in one line, as the runtime logs it.
func (e HistoryLost) String() string {
	return fmt.Sprintf("stream %s: change stream history lost, applying %v: %v", e.Stream, e.Policy, e.Err)
}

// String describes the event in one line, as the runtime logs it.
func (e GapRecorded) String() string {
	return fmt.Sprintf("stream %s: gap recorded (%v)", e.Stream, e.Policy)
}

// String describes the event in one line, as the runtime logs it.
func (e Invalidated) String() string {
	return fmt.Sprintf("stream %s invalidated by %q, %v", e.Stream, e.Cause, e.Action)
}

// String describes the event in one line, as the runtime logs it.
func (e LeadershipChanged) String() string {
	if e.Leader {
		return fmt.Sprintf("stream %s: leader (epoch %d)", e.Stream, e.Epoch)
	}
	if e.Change != "" && e.Change != LeadershipAcquired {
		s := fmt.Sprintf("stream %s: leadership %s (epoch %d)", e.Stream, e.Change, e.Epoch)
		if e.Why != "" {
			s += ": " + e.Why
		}
		return s
	}
	return fmt.Sprintf("stream %s: not leader (owner %q, epoch %d)", e.Stream, e.Owner, e.Epoch)
}

// String describes the event in one line, as the runtime logs it.
func (e SnapshotStarted) String() string {
	return fmt.Sprintf("stream %s snapshot %s started (%s, %d ranges, ~%d documents)", e.Stream, e.Snapshot.ID,
		e.Snapshot.Reason, e.Snapshot.RangesTotal, e.Snapshot.EstimatedTotal)
}

// String describes the event in one line, as the runtime logs it.
func (e SnapshotResumed) String() string {
	return fmt.Sprintf("stream %s snapshot %s resumed (%d/%d ranges done, %d documents)", e.Stream, e.Snapshot.ID,
		e.Snapshot.RangesDone, e.Snapshot.RangesTotal, e.Snapshot.Documents)
}

// String describes the event in one line, as the runtime logs it.
func (e SnapshotProgress) String() string {
	s := fmt.Sprintf("stream %s snapshot %s: %d/%d ranges, %d documents, %.0f/s, ETA %v", e.Stream, e.Snapshot.ID,
		e.Snapshot.RangesDone, e.Snapshot.RangesTotal, e.Snapshot.Documents, e.Snapshot.Rate, e.Snapshot.ETA)
	if e.Snapshot.AtRisk {
		s += ": " + e.Snapshot.Warning
	}
	return s
}

// String describes the event in one line, as the runtime logs it.
func (e SnapshotDone) String() string {
	return fmt.Sprintf("stream %s snapshot %s done (%d documents, %d dead-lettered)", e.Stream, e.Snapshot.ID,
		e.Snapshot.Documents, e.Snapshot.DeadLettered)
}

// String describes the event in one line, as the runtime logs it.
func (e CursorChanged) String() string {
	if e.Attached {
		return fmt.Sprintf("stream %s attached to the shared cursor: %s", e.Stream, e.Why)
	}
	return fmt.Sprintf("stream %s detached from the shared cursor, catching up on its own: %s", e.Stream, e.Why)
}

// String describes the event in one line, as the runtime logs it.
func (e NamespaceMissing) String() string {
	return fmt.Sprintf("stream %s: namespace %s does not exist (since %s): the stream sees no events until it is created",
		e.Stream, e.Namespace, e.Since.UTC().Format(time.RFC3339))
}
