package storetest

import (
	"context"
	"time"

	"github.com/watchtree/watchtree/store"
)

// CheckpointStore is what the checkpointer needs (actors/checkpointer.Store) plus the root's
// listing. A checkpoint's key is its Scope (Stream, Instance).
type CheckpointStore interface {
	// Load returns the checkpoint of scope; ok is false (and err nil) if there is none or it
	// has expired.
	Load(ctx context.Context, scope store.Scope) (cp store.Checkpoint, ok bool, err error)
	// Save upserts cp by cp.Scope() unless the stored Epoch is higher, in which case it fails
	// with an error matching store.ErrFenced and leaves the stored record unchanged.
	Save(ctx context.Context, cp store.Checkpoint) error
	// ListCheckpoints returns the unexpired checkpoints of the stream, every scope: the shared
	// one first, then the instances' by name; empty, not an error, when there are none.
	ListCheckpoints(ctx context.Context, stream string) ([]store.Checkpoint, error)
}

// GapStore is the checkpointer's GapRecorder plus the root's listing.
type GapStore interface {
	// RecordGap upserts g by g.ID.
	RecordGap(ctx context.Context, g store.Gap) error
	// ListGaps returns the gaps of scope in ascending At order (ties by ID); empty, not an
	// error, when there are none.
	ListGaps(ctx context.Context, scope store.Scope) ([]store.Gap, error)
}

// DeadLetterStore is the dispatcher's DeadLetterWriter plus the root's listing and replay. A
// dead letter's key is (Stream, Instance, ID): every read and mutation names its scope and ID.
type DeadLetterStore interface {
	// PutDeadLetter upserts dl by (dl.Stream, dl.Instance, dl.ID): a second put of the same
	// key replaces the whole record; another scope's record of the same ID is left alone.
	PutDeadLetter(ctx context.Context, dl store.DeadLetter) error
	// ListDeadLetters returns up to limit (limit ≤ 0: all) unexpired dead letters of scope,
	// oldest first: ascending CreatedAt, ties by ID.
	ListDeadLetters(ctx context.Context, scope store.Scope, limit int) ([]store.DeadLetter, error)
	// GetDeadLetter returns scope's dead letter with that ID, or an error matching
	// store.ErrNotFound if there is none or it has expired.
	GetDeadLetter(ctx context.Context, scope store.Scope, id string) (store.DeadLetter, error)
	// DeleteDeadLetter removes it; store.ErrNotFound if there is none.
	DeleteDeadLetter(ctx context.Context, scope store.Scope, id string) error
	// MarkReplayed increments ReplayCount and sets LastReplayAt to at; store.ErrNotFound if
	// there is none (or it has expired).
	MarkReplayed(ctx context.Context, scope store.Scope, id string, at time.Time) error
}

// SnapshotStore keeps the progress of a stream's snapshot (actors/checkpointer.SnapshotStore and
// actors/snapshot.Store): one record per scope (stream, and instance for an ALL_INSTANCES stream), replaced by every save.
type SnapshotStore interface {
	// LoadSnapshot returns scope's record; ok is false (and err nil) if there is none.
	LoadSnapshot(ctx context.Context, scope store.Scope) (sn store.Snapshot, ok bool, err error)
	// SaveSnapshot upserts sn by its scope (sn.Scope()).
	SaveSnapshot(ctx context.Context, sn store.Snapshot) error
}
