package observe

import (
	"time"

	"github.com/watchtree/watchtree/internal/enumstr"
)

// Event is one of the event types of this package, listed by Kinds. Every event carries the
// stream name and the time it happened (Meta). The set is sealed: only this package's types
// implement Event.
type Event interface {
	// Kind returns the event's kind.
	Kind() Kind
	// EventMeta returns the part every event shares: the stream and the time.
	EventMeta() Meta
	// String returns a one-line description for logs.
	String() string
	event()
}

// Meta is the part every Event shares.
type Meta struct {
	// Stream is the stream's Name.
	Stream string
	// Time is when the event happened, on the runtime's clock (watchtree.Config's clock, the
	// wall clock by default).
	Time time.Time
}

// EventMeta returns m.
func (m Meta) EventMeta() Meta { return m }

// Kind says which event type an Event is. Its String is the name the console shows
// (messages.LifecycleEvent.kind); the zero Kind is no event.
type Kind uint8

// The kinds, one per event type.
const (
	KindStarted Kind = iota + 1
	KindStopped
	KindRestarted
	KindRetryScheduled
	KindSkipped
	KindDeadLettered
	KindDeadLetterFailed
	KindCheckpointed
	KindCheckpointFailed
	KindHistoryLost
	KindGapRecorded
	KindInvalidated
	KindLeadershipChanged
	KindSnapshotStarted
	KindSnapshotResumed
	KindSnapshotProgress
	KindSnapshotDone
	KindNamespaceMissing
	KindCheckpointRefused
	KindCursorChanged
	kindEnd // one past the last kind
)

var kindNames = [kindEnd]string{
	KindStarted:           "started",
	KindStopped:           "stopped",
	KindRestarted:         "restarted",
	KindRetryScheduled:    "retry",
	KindSkipped:           "skipped",
	KindDeadLettered:      "dead-lettered",
	KindDeadLetterFailed:  "dead-letter-failed",
	KindCheckpointed:      "checkpointed",
	KindCheckpointFailed:  "checkpoint-failed",
	KindHistoryLost:       "history-lost",
	KindGapRecorded:       "gap",
	KindInvalidated:       "invalidated",
	KindLeadershipChanged: "leadership",
	KindSnapshotStarted:   "snapshot-started",
	KindSnapshotResumed:   "snapshot-resumed",
	KindSnapshotProgress:  "snapshot-progress",
	KindSnapshotDone:      "snapshot-done",
	KindNamespaceMissing:  "namespace-missing",
	KindCheckpointRefused: "checkpoint-refused",
	KindCursorChanged:     "cursor",
}

// String returns the kind's name: "started", "stopped", "restarted", "retry", "skipped",
// "dead-lettered", "dead-letter-failed", "checkpointed", "checkpoint-failed", "history-lost",
// "gap", "invalidated", "leadership", "snapshot-started", "snapshot-resumed",
// "snapshot-progress", "snapshot-done", "namespace-missing", "checkpoint-refused" or "cursor";
// "Kind(n)" for a value that is none of them.
func (k Kind) String() string { return enumstr.Of(kindNames[:], k, "Kind") }

// Kinds returns every Kind, in declaration order (a new slice on each call). A consumer that
// maps events, such as the console feed or a metrics adapter, tests that it handles each.
func Kinds() []Kind {
	out := make([]Kind, 0, kindEnd-1)
	for k := KindStarted; k < kindEnd; k++ {
		out = append(out, k)
	}
	return out
}

// StopReason tells a graceful stop from a crash.
type StopReason int

const (
	// Graceful: stopped by Stop (runtime or handle), after draining and flushing.
	Graceful StopReason = iota
	// Crashed: the stream died (cursor error, history lost, invalidated, gave up, ...). The
	// supervisor's RestartPolicy decides whether it comes back.
	Crashed
)

// String returns "graceful" or "crashed", or "StopReason(n)" for a value that is neither.
func (r StopReason) String() string { return enumstr.Of(stopReasonNames, r, "StopReason") }

var stopReasonNames = []string{Graceful: "graceful", Crashed: "crashed"}

// SkipReason says which rule settled an event on purpose (Skipped.Reason). The dispatcher sets
// it where it decides the skip; the detail the rule gave is Skipped.Detail.
type SkipReason uint8

const (
	// SkipByHandler: the handler returned watchtree.Skip(reason) (possibly wrapped); the
	// detail is that reason.
	SkipByHandler SkipReason = iota + 1
)

// String returns "handler", or "SkipReason(n)" for a value that is no rule.
func (r SkipReason) String() string { return enumstr.Of(skipReasonNames, r, "SkipReason") }

var skipReasonNames = []string{SkipByHandler: "handler"}

// LeadershipChange says what happened to a SingleLeader stream's leadership on this instance.
type LeadershipChange string

// The leadership changes reported by LeadershipChanged.
const (
	// LeadershipAcquired: this instance acquired the lease and starts the stream.
	LeadershipAcquired LeadershipChange = "acquired"
	// LeadershipLost: a renewal was refused or late; the stream stopped at once.
	LeadershipLost LeadershipChange = "lost"
	// LeadershipReleased: the lease was released by a graceful stop.
	LeadershipReleased LeadershipChange = "released"
	// LeadershipHandedOver: the lease was released for balance, after a graceful stop.
	LeadershipHandedOver LeadershipChange = "handed-over"
	// LeadershipFenced: a checkpoint or dead-letter write was refused by a newer epoch; the
	// stream stopped at once.
	LeadershipFenced LeadershipChange = "fenced"
)

// SnapshotStatus is the progress of a stream's snapshot, as the snapshot events carry it and
// watchtree.StreamStatus reports it (Snapshot, OnDemand).
type SnapshotStatus struct {
	// ID identifies the snapshot; it is part of every snapshot event's ID.
	ID string
	// Reason is "initial" (the first start), "rebuild" (RebuildFromSnapshot) or "on-demand"
	// (Handle.Snapshot).
	Reason string
	// Phase is set for an on-demand snapshot: "running", "done", "failed" (Error says why) or
	// "abandoned" (the stream restarted or stopped; Error says why).
	Phase string
	// ChunksDone counts the chunks of an on-demand snapshot released to the handlers; Dropped
	// the rows left out because a live event changed their document inside the chunk's window.
	ChunksDone int
	Dropped    uint64
	// Running is true while a run reads documents; Done once every range is done.
	Running, Done bool
	// Resumed is true when the current run continued a snapshot an earlier run had begun.
	Resumed bool
	// RangesDone of RangesTotal _id ranges are finished.
	RangesDone, RangesTotal int
	// Documents is the number of documents handled (settled) so far, over every run;
	// EstimatedTotal the number of matching documents counted when the ranges were planned.
	Documents, EstimatedTotal uint64
	// DeadLettered counts the snapshot documents of this run that went to the dead letters.
	DeadLettered uint64
	// Rate is documents per second in this run; ETA the time left at that rate (0: unknown).
	Rate float64
	ETA  time.Duration
	// StartedAt is when the snapshot was created; DoneAt when it finished.
	StartedAt, DoneAt time.Time
	// OplogWindow is the time the oplog spans (0: it cannot be read). AtRisk is true when, at
	// the current rate, the snapshot would end after its handoff position left the oplog;
	// Warning then says so.
	OplogWindow time.Duration
	AtRisk      bool
	Warning     string
	// Error is the error that ended the latest run, if it failed.
	Error string
}
