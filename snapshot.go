package watchtree

import (
	"github.com/watchtree/watchtree/internal/policy"
)

// SnapshotPolicy configures the copy of a collection's existing documents through the stream's
// handlers (the initial load, and the rebuild of RebuildFromSnapshot). It is policy.Snapshot:
// see there for the fields, their defaults (Mode SnapshotNever, 4 partitions, chunks of 1000
// documents) and the guarantees.
type SnapshotPolicy = policy.Snapshot

// SnapshotMode says when a stream copies the existing documents. It is policy.SnapshotMode.
type SnapshotMode = policy.SnapshotMode

// The snapshot modes; see policy.SnapshotMode.
const (
	SnapshotNever      = policy.SnapshotNever
	SnapshotInitial    = policy.SnapshotInitial
	SnapshotWhenNeeded = policy.SnapshotWhenNeeded
)

// RebuildFromSnapshot records the gap, captures and persists the current position, copies the
// collection again through the handlers (Stream.Snapshot's Filter, Partitions and BatchSize;
// resumable), then streams from the captured position. See policy.RebuildFromSnapshot.
var RebuildFromSnapshot = policy.RebuildFromSnapshot
