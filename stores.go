package watchtree

import (
	"context"
	"time"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// CheckpointStore keeps the resume positions (Config.Checkpoints): one record per scope (a
// SingleLeader stream's shared position; an AllInstances stream's position of each instance),
// replaced by every save. The checkpointer calls it from one goroutine per stream.
type CheckpointStore interface {
	// Load returns the checkpoint of scope; ok is false (and err nil) when there is none or it
	// has expired.
	Load(ctx context.Context, scope store.Scope) (cp store.Checkpoint, ok bool, err error)
	// Save upserts cp by cp.Scope() unless the stored Epoch is higher: then it fails with an
	// error matching store.ErrFenced and changes nothing.
	Save(ctx context.Context, cp store.Checkpoint) error
	// ListCheckpoints returns the unexpired checkpoints of the stream, every scope: the shared
	// one first, then the instances' by name (Runtime.Checkpoints).
	ListCheckpoints(ctx context.Context, stream string) ([]store.Checkpoint, error)
}

// DeadLetterStore keeps dead letters (Config.DeadLetters). A record's key is (Stream, Instance,
// ID): streams that dead-letter the same event each keep their own record, and so does each
// instance of an AllInstances stream. The dispatcher writes from its lanes concurrently;
// DeadLetters and Replay read and delete.
type DeadLetterStore interface {
	// PutDeadLetter upserts dl by (dl.Stream, dl.Instance, dl.ID). A nil error means the
	// record is durable: the event settles right after.
	PutDeadLetter(ctx context.Context, dl store.DeadLetter) error
	// ListDeadLetters returns up to limit (limit <= 0: all) unexpired dead letters of scope,
	// oldest first: ascending CreatedAt, ties by ID.
	ListDeadLetters(ctx context.Context, scope store.Scope, limit int) ([]store.DeadLetter, error)
	// GetDeadLetter returns scope's dead letter id, or an error matching store.ErrNotFound
	// when there is none or it has expired.
	GetDeadLetter(ctx context.Context, scope store.Scope, id string) (store.DeadLetter, error)
	// DeleteDeadLetter removes it; an error matching store.ErrNotFound when there is none.
	DeleteDeadLetter(ctx context.Context, scope store.Scope, id string) error
	// MarkReplayed increments its ReplayCount and sets its LastReplayAt to at; an error
	// matching store.ErrNotFound when there is none.
	MarkReplayed(ctx context.Context, scope store.Scope, id string, at time.Time) error
}

// GapStore records history skipped on purpose (Config.Gaps): the checkpointer writes a gap
// before it resumes past lost history (OnHistoryLost ResumeFromNow or Rebuild). A second
// record with the same Gap.ID replaces the first.
type GapStore interface {
	// RecordGap writes g durably; on an error the stream does not resume past the gap, and
	// the write is retried.
	RecordGap(ctx context.Context, g store.Gap) error
}

// storeSet is the stores of the streams that share a store database and dead-letter
// collection: Config's stores where set, the default MongoDB store for the others.
type storeSet struct {
	checkpoints CheckpointStore
	deadLetters DeadLetterStore
	gaps        GapStore
	// snapshots keeps snapshot progress: Config.Checkpoints when it implements SnapshotStore,
	// else the default MongoDB store; nil when neither (a stream with a snapshot is refused).
	snapshots SnapshotStore
	// mongo is the default store behind the stores Config leaves nil; nil when Config sets them
	// all.
	mongo *mongostore.Store
}

// EnsureIndexes creates the indexes of the default MongoDB store (idempotent); a store set
// entirely by Config needs none from the runtime.
func (s *storeSet) EnsureIndexes(ctx context.Context) error {
	if s.mongo == nil {
		return nil
	}
	return s.mongo.EnsureIndexes(ctx)
}

// ownStores reports whether Config sets every store, so that the runtime needs no store
// database.
func (c Config) ownStores() bool {
	return c.Checkpoints != nil && c.DeadLetters != nil && c.Gaps != nil
}

// anyStore reports whether Config sets at least one store.
func (c Config) anyStore() bool {
	return c.Checkpoints != nil || c.DeadLetters != nil || c.Gaps != nil
}
