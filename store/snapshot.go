package store

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Snapshot states: the values of Snapshot.State.
const (
	// SnapshotRunning: the copy has begun (its handoff position is durable) and is not finished.
	SnapshotRunning = "running"
	// SnapshotDone: every range was copied; the copy never runs again.
	SnapshotDone = "done"
)

// Snapshot reasons: the values of Snapshot.Reason.
const (
	// SnapshotReasonInitial: the first start of the stream (SnapshotInitial, SnapshotWhenNeeded).
	SnapshotReasonInitial = "initial"
	// SnapshotReasonRebuild: the repair after lost history (RebuildFromSnapshot).
	SnapshotReasonRebuild = "rebuild"
)

// Snapshot is the durable progress of a stream's copy of its collection's existing documents.
// There is at most one per Scope (stream, and instance for an AllInstances stream: each instance
// copies for itself, as it keeps its own position), the latest; saving one replaces the previous
// one (an upsert keyed by the scope). The checkpointer creates it (State running, no ranges) before the stream's
// handoff position is persisted; the snapshot actor plans the ranges and records, per range, the
// _id of the last document whose handling settled, and finally State done.
type Snapshot struct {
	// Stream and Instance are the record's key, its Scope (Instance empty for the shared scope).
	Stream   string
	Instance string
	// ID identifies the copy: it is part of every snapshot event's ID, so that the events of one
	// copy keep their IDs across a resume, and a later copy's events differ.
	ID string
	// State is SnapshotRunning or SnapshotDone.
	State string
	// Reason is SnapshotReasonInitial or SnapshotReasonRebuild.
	Reason string
	// HandoffToken and HandoffTime are the stream position captured before the first document
	// was read: the change stream starts there once the copy is done.
	HandoffToken bson.Raw
	HandoffTime  bson.Timestamp
	// Planned is true once Ranges holds the plan (the ranges never change afterwards).
	Planned bool
	// Ranges are the _id ranges, in _id order.
	Ranges []SnapshotRange
	// Total is the number of matching documents counted when the ranges were planned (an
	// estimate of the work, for progress and ETA).
	Total uint64
	// StartedAt is when the copy was created, UpdatedAt when the record was last saved, DoneAt
	// when it finished (zero until then). Stores keep them at millisecond precision.
	StartedAt, UpdatedAt, DoneAt time.Time
}

// SnapshotRange is one _id range of a Snapshot and its progress. Min and Max are documents
// {_id: value}: the range holds the documents with Min <= _id < Max, nil meaning unbounded on
// that side.
type SnapshotRange struct {
	Min, Max bson.Raw // the bounds, {_id: value} each, nil for unbounded
	// Last is {_id: value} of the last document of the range (in _id order) whose handling
	// settled, with every earlier one; nil when none has yet. A resume reads after it.
	Last bson.Raw
	// Done is true once every document of the range settled.
	Done bool
	// Read counts the documents of the range that settled (informational, for progress).
	Read uint64
}

// Clone returns a deep copy of s.
func (s Snapshot) Clone() Snapshot {
	s.HandoffToken = cloneRaw(s.HandoffToken)
	if s.Ranges != nil {
		rs := make([]SnapshotRange, len(s.Ranges))
		for i, r := range s.Ranges {
			rs[i] = SnapshotRange{Min: cloneRaw(r.Min), Max: cloneRaw(r.Max), Last: cloneRaw(r.Last), Done: r.Done, Read: r.Read}
		}
		s.Ranges = rs
	}
	return s
}

// Finished reports whether the copy is done.
func (s Snapshot) Finished() bool { return s.State == SnapshotDone }

// Scope returns the record's key.
func (s Snapshot) Scope() Scope { return Scope{Stream: s.Stream, Instance: s.Instance} }

// SnapshotStore keeps the progress of each stream's snapshot (watchtree.Config.Snapshots): at
// most one Snapshot per Scope, the latest, replaced by every save. The checkpointer creates the
// record of a new snapshot before it persists the snapshot's handoff position, and reads it at
// every start to resume an interrupted copy; the snapshot actor saves its progress. The record
// and the stream's checkpoint belong together (the handoff position is a checkpoint), so they
// should live in stores with the same durability. store/memstore and store/mongostore implement
// it, and store/storetest.TestSnapshotStore is its contract.
//
// Every method honours ctx: a done context fails the call with an error matching ctx.Err() and
// changes nothing.
type SnapshotStore interface {
	// LoadSnapshot returns scope's record; ok is false (and err nil) when there is none.
	LoadSnapshot(ctx context.Context, scope Scope) (sn Snapshot, ok bool, err error)
	// SaveSnapshot upserts sn by its scope (sn.Scope()). A nil error means the progress in it
	// is durable.
	SaveSnapshot(ctx context.Context, sn Snapshot) error
}
