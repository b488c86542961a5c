package watchtree

import (
	"github.com/watchtree/watchtree/policy"
)

// SnapshotPolicy (Stream.Snapshot) configures the copy of a collection's existing documents (the
// initial load, and the rebuild of RebuildFromSnapshot); the snapshot actor applies it. The zero
// value never copies. It is package policy's Snapshot, where its fields (units, defaults,
// bounds), how the copy runs and Validate are documented.
//
// Its fields, each documented on policy.Snapshot:
//   - Mode SnapshotMode: when the copy runs (default SnapshotNever)
//   - Filter any: a query document; only the documents it matches are copied (default: all)
//   - Partitions int: the _id ranges read in parallel (default 4, at most 256)
//   - BatchSize int: the documents per read, the unit of progress (default 1000)
//   - HandoffRefresh time.Duration: how often, at most, the handoff position moves forward
//     during the copy (default 1m)
type SnapshotPolicy = policy.Snapshot

// SnapshotMode is SnapshotPolicy.Mode: when a stream copies the documents that already exist in
// its collection. It is package policy's SnapshotMode, where its values are documented.
type SnapshotMode = policy.SnapshotMode

// The SnapshotMode values (see policy.SnapshotNever, SnapshotInitial and SnapshotWhenNeeded).
const (
	// SnapshotNever (the default) never copies existing documents.
	SnapshotNever = policy.SnapshotNever
	// SnapshotInitial copies the existing documents on the first start of the stream.
	SnapshotInitial = policy.SnapshotInitial
	// SnapshotWhenNeeded is SnapshotInitial, and also the repair when the stream's position has
	// left the oplog (RebuildFromSnapshot).
	SnapshotWhenNeeded = policy.SnapshotWhenNeeded
)

// RebuildFromSnapshot records the gap, captures and persists the current position, copies the
// collection's documents again through the stream's handlers (Stream.Snapshot's Filter,
// Partitions and BatchSize; resumable like an initial copy), then streams from the captured
// position, so nothing written during the copy is missed. It is the built-in rebuild: the
// handlers see the copied documents as snapshot events (OnSnapshot, else OnChange).
var RebuildFromSnapshot = policy.RebuildFromSnapshot
