package watchtree

import (
	"time"

	"github.com/watchtree/watchtree/policy"
)

// SnapshotPolicy (Stream.Snapshot) configures the copy of a collection's existing documents (the
// initial load, and the rebuild of RebuildFromSnapshot); the snapshot actor applies it. The zero
// value never copies.
//
// The copy is taken without a gap: the stream's position is captured and persisted before the
// first document is read, the documents are read in _id order in Partitions parallel ranges of
// BatchSize chunks, each document goes through the stream's handlers (OnSnapshot, else
// OnChange) with the same retries and dead letters as a change event, and once every range is
// done the stream streams from the captured position. A change made during the copy is
// therefore delivered after it, possibly to a document the copy already showed in its newer
// state: targets must be idempotent (see the README). Progress is persisted per range, so a
// stopped or crashed copy resumes where each range was; a finished copy never runs again.
type SnapshotPolicy struct {
	// Mode says when the copy runs. Default SnapshotNever.
	Mode SnapshotMode
	// Filter is a server-side query document (a bson.D, bson.M, bson.Raw or any value that
	// marshals to a document): only the documents it matches are copied. Default: all. It is
	// marshalled once, when the stream is spawned.
	Filter any
	// Partitions is the number of _id ranges read in parallel. Default 4, at most 256.
	Partitions int
	// BatchSize is the number of documents read per chunk (one find), and the unit of progress:
	// after a crash at most one chunk per range is read and handled again. Default 1000, at
	// most 100000.
	BatchSize int
	// HandoffRefresh is how often, at most, the handoff position moves forward while the copy
	// runs: an idle change stream from the handoff position (the stream's own pipeline) that has
	// returned no event up to its post-batch resume token proves that starting there skips
	// nothing, so the position is persisted there, and a long copy of a quiet collection on a
	// busy cluster does not lose its position when the oplog rolls over. Once the collection
	// changes, the position stays where it is (the change must be delivered). Default 1 minute.
	HandoffRefresh time.Duration
}

// Validate checks p. The error is a *ConfigError on field "SnapshotPolicy.<Field>" and matches
// ErrInvalidConfig.
func (p SnapshotPolicy) Validate() error { return p.internal().Validate() }

// internal is p in the form the snapshot actor takes. It converts field by field, because Mode
// is a root type; TestPolicyConversionsKeepEveryField fails when a field is added to one side
// only.
func (p SnapshotPolicy) internal() policy.Snapshot {
	return policy.Snapshot{Mode: policy.SnapshotMode(p.Mode), Filter: p.Filter, Partitions: p.Partitions,
		BatchSize: p.BatchSize, HandoffRefresh: p.HandoffRefresh}
}

// SnapshotMode says when a stream copies the documents that already exist in its collection
// through its handlers before it streams changes.
type SnapshotMode uint8

const (
	// SnapshotNever (the default) never copies existing documents: the stream starts from its
	// start position.
	SnapshotNever = SnapshotMode(policy.SnapshotNever)
	// SnapshotInitial copies the existing documents on the first start of the stream, the one
	// that finds no checkpoint, then streams the changes made since the copy began.
	SnapshotInitial = SnapshotMode(policy.SnapshotInitial)
	// SnapshotWhenNeeded is SnapshotInitial, and also the repair when the stream's position has
	// left the oplog: the stream then applies RebuildFromSnapshot (OnHistoryLost must be left
	// at its default or set to RebuildFromSnapshot).
	SnapshotWhenNeeded = SnapshotMode(policy.SnapshotWhenNeeded)
)

// String returns "Never", "Initial" or "WhenNeeded".
func (m SnapshotMode) String() string { return policy.SnapshotMode(m).String() }

// RebuildFromSnapshot records the gap, captures and persists the current position, copies the
// collection's documents again through the stream's handlers (Stream.Snapshot's Filter,
// Partitions and BatchSize; resumable like an initial copy), then streams from the captured
// position, so nothing written during the copy is missed. It is the built-in rebuild: the
// handlers see the copied documents as snapshot events (OnSnapshot, else OnChange).
var RebuildFromSnapshot = HistoryLostPolicy{policy.RebuildFromSnapshot}
