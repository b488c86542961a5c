package storetest

import (
	"context"
	"time"

	"github.com/watchtree/watchtree/store"
)

// CheckpointStore is what the checkpointer needs (actors/checkpointer.Store).
type CheckpointStore interface {
	// Load returns the stream's checkpoint; ok is false (and err nil) if there is none.
	Load(ctx context.Context, stream string) (cp store.Checkpoint, ok bool, err error)
	// Save upserts cp by cp.Stream unless the stored Epoch is higher, in which case it fails
	// with an error matching store.ErrFenced and leaves the stored record unchanged.
	Save(ctx context.Context, cp store.Checkpoint) error
}

// GapStore is the checkpointer's GapRecorder plus the root's listing.
type GapStore interface {
	// RecordGap upserts g by g.ID.
	RecordGap(ctx context.Context, g store.Gap) error
	// ListGaps returns the stream's gaps in ascending At order (ties by ID); empty, not an
	// error, when there are none.
	ListGaps(ctx context.Context, stream string) ([]store.Gap, error)
}

// DeadLetterStore is the dispatcher's DeadLetterWriter plus the root's listing and replay. A
// dead letter's key is (Stream, ID): every read and mutation names both.
type DeadLetterStore interface {
	// PutDeadLetter upserts dl by (dl.Stream, dl.ID): a second put of the same pair replaces
	// the whole record; another stream's record of the same ID is left alone.
	PutDeadLetter(ctx context.Context, dl store.DeadLetter) error
	// ListDeadLetters returns up to limit (limit ≤ 0: all) unexpired dead letters of the
	// stream, oldest first: ascending CreatedAt, ties by ID.
	ListDeadLetters(ctx context.Context, stream string, limit int) ([]store.DeadLetter, error)
	// GetDeadLetter returns the stream's dead letter with that ID, or an error matching
	// store.ErrNotFound if there is none or it has expired.
	GetDeadLetter(ctx context.Context, stream, id string) (store.DeadLetter, error)
	// DeleteDeadLetter removes it; store.ErrNotFound if there is none.
	DeleteDeadLetter(ctx context.Context, stream, id string) error
	// MarkReplayed increments ReplayCount and sets LastReplayAt to at; store.ErrNotFound if
	// there is none (or it has expired).
	MarkReplayed(ctx context.Context, stream, id string, at time.Time) error
}

// SnapshotStore keeps the progress of a stream's snapshot (actors/checkpointer.SnapshotStore and
// actors/snapshot.Store): one record per stream, replaced by every save.
type SnapshotStore interface {
	// LoadSnapshot returns the stream's record; ok is false (and err nil) if there is none.
	LoadSnapshot(ctx context.Context, stream string) (sn store.Snapshot, ok bool, err error)
	// SaveSnapshot upserts sn by sn.Stream.
	SaveSnapshot(ctx context.Context, sn store.Snapshot) error
}
