package store

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Checkpoint sources: the values of Checkpoint.Source.
const (
	// SourceEvent: the token of the low-water-mark event (the newest event with every earlier
	// event settled).
	SourceEvent = "event"
	// SourcePBRT: a post-batch resume token, persisted when everything before it has settled
	// (also the idle-stream position).
	SourcePBRT = "pbrt"
	// SourceInitial: the position captured on the very first start, before anything was consumed.
	SourceInitial = "initial"
	// SourceResumeFromNow: the position captured after history was lost under ResumeFromNow.
	SourceResumeFromNow = "resumeFromNow"
	// SourceRebuild: the position captured before a Rebuild after history was lost.
	SourceRebuild = "rebuild"
	// SourceMigrated: an instance's first position, taken from the stream's shared checkpoint
	// of an earlier version's layout (one record per stream, whatever the instance).
	SourceMigrated = "migrated"
	// SourceSnapshot: the handoff position of a snapshot, captured before its first document was
	// read (possibly moved forward while the collection stayed idle during the copy).
	SourceSnapshot = "snapshot"
)

// Checkpoint is a durable resume position. There is at most one per Scope (the stream, and the
// instance of an AllInstances stream); saving one replaces the previous one of the same scope
// (an upsert keyed by Stream and Instance), conditional on Epoch (fencing).
type Checkpoint struct {
	// Stream is the stream name; with Instance, the record's key.
	Stream string
	// Instance is the instance name of an AllInstances stream's own position; empty for the
	// stream's shared position (SingleLeader, and the layout of earlier versions).
	Instance string
	// Token is the resume token document ({_data: …}) to resume after; nil = none (a position
	// known only by ClusterTime, e.g. a StartAt(t) start before any event).
	Token bson.Raw
	// ClusterTime is the cluster time of the position when known (for gap records and lag);
	// the zero Timestamp = unknown.
	ClusterTime bson.Timestamp
	// Source says how the position was obtained: one of the Source* constants.
	Source string
	// Epoch is the fencing epoch of the writer (0 in AllInstances mode). A Save with an Epoch
	// lower than the stored one fails with ErrFenced; an equal one succeeds unless its position
	// sorts before the stored one (ErrBackward); a higher one succeeds.
	Epoch int64
	// Owner is the instance id of the writer (informational).
	Owner string
	// Settled counts the events settled by this stream's incarnation chain (informational).
	Settled uint64
	// UpdatedAt is the writer's wall-clock time of the save. Stores keep it as given, truncated
	// to milliseconds by stores that persist BSON dates.
	UpdatedAt time.Time
	// ExpiresAt is when the store may delete the record because it was not written since
	// (retention of a per-instance checkpoint: UpdatedAt + the stream's Checkpoint.Retention);
	// zero = never (the shared position never expires). An expired record is absent from every
	// read, and is removed eventually (mongostore: by the server's TTL monitor).
	ExpiresAt time.Time
	// Rewind marks a save that may move the position backward on purpose: a start position
	// the stream's configuration imposes (StartAt, or an earlier Spawn's seed replacing a later
	// one), or the position a lost-history path writes over one that cannot be resumed. Without
	// it, a save behind the stored position of the same epoch fails with ErrBackward. It is
	// never stored: a loaded Checkpoint has it false.
	Rewind bool
}

// Scope returns the record's key: its Stream and Instance.
func (c Checkpoint) Scope() Scope { return Scope{Stream: c.Stream, Instance: c.Instance} }

// Expired reports whether c's retention has run out at now.
func (c Checkpoint) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && now.After(c.ExpiresAt)
}

// Clone returns a deep copy of c (its Token does not share memory with c's).
func (c Checkpoint) Clone() Checkpoint {
	c.Token = cloneRaw(c.Token)
	return c
}

// cloneRaw copies r; nil stays nil.
func cloneRaw(r bson.Raw) bson.Raw {
	if r == nil {
		return nil
	}
	return append(bson.Raw(make([]byte, 0, len(r))), r...)
}

// CheckpointStore keeps the resume positions: at most one Checkpoint per Scope, replaced by
// every save (watchtree.Config.Checkpoints). The checkpointer of each stream calls Load and Save
// from one goroutine, one call at a time, with a context cancelled when it stops or restarts;
// ListCheckpoints serves operators (Runtime.Checkpoints). store/memstore, store/mongostore and
// store/redisstore implement it, and store/storetest.TestCheckpointStore is its contract.
//
// Every method honours ctx: a done context fails the call with an error matching ctx.Err() and
// changes nothing.
type CheckpointStore interface {
	// Load returns the checkpoint of scope; ok is false (and err nil) when there is none or it
	// has expired (ExpiresAt passed).
	Load(ctx context.Context, scope Scope) (cp Checkpoint, ok bool, err error)
	// Save upserts cp by cp.Scope(), in one atomic conditional write, unless
	//   - the stored Epoch is higher: then it fails with an error matching ErrFenced;
	//   - the stored Epoch is equal, cp is not a Rewind, and cp's position sorts before the
	//     stored one (ComparePositions): then it fails with an error matching ErrBackward.
	// Either way the stored record is left unchanged. An expired record is absent: it refuses
	// nothing. A higher Epoch succeeds whatever its position. A nil error means the record is
	// durable.
	Save(ctx context.Context, cp Checkpoint) error
	// ListCheckpoints returns the unexpired checkpoints of the stream, every scope: the shared
	// one first, then the instances' by name; empty, not an error, when there are none.
	ListCheckpoints(ctx context.Context, stream string) ([]Checkpoint, error)
}
