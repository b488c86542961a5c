package watchtree

import (
	"github.com/watchtree/watchtree/internal/policy"
)

// SnapshotPolicy is Stream.Snapshot, the copy of the existing documents (internal/policy.Snapshot).
type SnapshotPolicy = policy.Snapshot

// SnapshotMode is SnapshotPolicy.Mode: when the copy runs (internal/policy.SnapshotMode).
type SnapshotMode = policy.SnapshotMode

// The snapshot modes.
const (
	// SnapshotNever (the default) never copies the existing documents.
	SnapshotNever = policy.SnapshotNever
	// SnapshotInitial copies them on the first start, the one that finds no checkpoint.
	SnapshotInitial = policy.SnapshotInitial
	// SnapshotWhenNeeded is SnapshotInitial, and RebuildFromSnapshot when the position has left
	// the oplog.
	SnapshotWhenNeeded = policy.SnapshotWhenNeeded
)

// RebuildFromSnapshot records the gap, captures and persists the current position, copies the
// collection again through the handlers (Stream.Snapshot's Filter, Partitions and BatchSize;
// resumable), then streams from the captured position.
var RebuildFromSnapshot = policy.RebuildFromSnapshot
