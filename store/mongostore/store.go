package mongostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/leasewatch"
)

// Default collection names.
const (
	DefaultCheckpointCollection = "_wt_checkpoints"
	DefaultDeadLetterCollection = "_wt_dead_letters"
	DefaultGapCollection        = "_wt_gaps"
	DefaultSnapshotCollection   = "_wt_snapshots"
	DefaultLeaseCollection      = "_wt_leases"
	DefaultInstanceCollection   = "_wt_instances"
)

// The names of the indexes EnsureIndexes creates (its doc lists them for operators).
const (
	indexDeadLetterTTL    = "expiresAt_ttl"
	indexDeadLetterStream = "stream_1_instance_1_createdAt_1"
	indexGapStream        = "stream_1_instance_1_at_1"
	indexCheckpointTTL    = "expiresAt_ttl"
	indexCheckpointStream = "stream_1_instance_1"
)

// Options configures a Store. The zero value is the documented default for every field.
type Options struct {
	// CheckpointCollection names the checkpoint collection. Default "_wt_checkpoints".
	CheckpointCollection string
	// DeadLetterCollection names the dead-letter collection. Default "_wt_dead_letters".
	DeadLetterCollection string
	// GapCollection names the gap collection. Default "_wt_gaps".
	GapCollection string
	// SnapshotCollection names the snapshot-progress collection. Default "_wt_snapshots".
	SnapshotCollection string
	// LeaseCollection names the SingleLeader lease collection. Default "_wt_leases".
	LeaseCollection string
	// InstanceCollection names the instance heartbeat collection (balanced leadership).
	// Default "_wt_instances".
	InstanceCollection string
	// WriteConcern of every write. Default majority (a save that reported success survives a
	// failover).
	WriteConcern *writeconcern.WriteConcern
	// Now is the clock that decides the expiry of dead letters and checkpoints on reads
	// (expired = Now() after expiresAt). Default time.Now. Tests inject a fake clock's Now.
	Now func() time.Time
}

// Validate reports the first invalid field, by name.
func (o Options) Validate() error {
	for _, c := range []struct{ field, name string }{
		{"CheckpointCollection", o.CheckpointCollection},
		{"DeadLetterCollection", o.DeadLetterCollection},
		{"GapCollection", o.GapCollection},
		{"SnapshotCollection", o.SnapshotCollection},
		{"LeaseCollection", o.LeaseCollection},
		{"InstanceCollection", o.InstanceCollection},
	} {
		if c.name == "" {
			continue
		}
		if err := validCollectionName(c.name); err != nil {
			return fmt.Errorf("mongostore: Options.%s %q: %w", c.field, c.name, err)
		}
	}
	return nil
}

func validCollectionName(name string) error {
	for _, r := range name {
		if r == '$' || r == 0 {
			return errors.New("must not contain '$' or NUL")
		}
	}
	if len(name) >= 7 && name[:7] == "system." {
		return errors.New("must not start with \"system.\"")
	}
	return nil
}

func (o Options) withDefaults() Options {
	o.CheckpointCollection = cmp.Or(o.CheckpointCollection, DefaultCheckpointCollection)
	o.DeadLetterCollection = cmp.Or(o.DeadLetterCollection, DefaultDeadLetterCollection)
	o.GapCollection = cmp.Or(o.GapCollection, DefaultGapCollection)
	o.SnapshotCollection = cmp.Or(o.SnapshotCollection, DefaultSnapshotCollection)
	o.LeaseCollection = cmp.Or(o.LeaseCollection, DefaultLeaseCollection)
	o.InstanceCollection = cmp.Or(o.InstanceCollection, DefaultInstanceCollection)
	if o.WriteConcern == nil {
		o.WriteConcern = writeconcern.Majority()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store implements every store interface of package store.
var (
	_ store.CheckpointStore = (*Store)(nil)
	_ store.DeadLetterStore = (*Store)(nil)
	_ store.GapStore        = (*Store)(nil)
	_ store.SnapshotStore   = (*Store)(nil)
	_ store.LeaseStore      = (*Store)(nil)
)

// Store implements the checkpoint, gap, dead-letter, snapshot and lease stores on one database. It is safe for
// concurrent use; it holds no state besides the collection handles.
type Store struct {
	checkpoints *mongo.Collection
	deadLetters *mongo.Collection
	gaps        *mongo.Collection
	snapshots   *mongo.Collection
	leases      *mongo.Collection
	instances   *mongo.Collection
	now         func() time.Time
	watches     leasewatch.Hub // WatchLease's watches, over one change stream (leaseFeed)
}

// New returns a Store on db. It does no I/O; call EnsureIndexes once (it is idempotent) before
// relying on the retention of dead letters and per-instance checkpoints.
func New(db *mongo.Database, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("mongostore: New: nil database")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	collOpts := options.Collection().
		SetWriteConcern(opts.WriteConcern).
		SetReadPreference(readpref.Primary())
	return &Store{
		checkpoints: db.Collection(opts.CheckpointCollection, collOpts),
		deadLetters: db.Collection(opts.DeadLetterCollection, collOpts),
		gaps:        db.Collection(opts.GapCollection, collOpts),
		snapshots:   db.Collection(opts.SnapshotCollection, collOpts),
		leases:      db.Collection(opts.LeaseCollection, collOpts),
		instances:   db.Collection(opts.InstanceCollection, collOpts),
		now:         opts.Now,
	}, nil
}

// EnsureIndexes creates the indexes of the three collections, under these names. Creating an
// index that already exists with the same options is a no-op.
//   - checkpoints: "expiresAt_ttl", a TTL index on expiresAt (expireAfterSeconds 0: a
//     per-instance checkpoint not written for its retention is deleted; the shared one has no
//     expiresAt and never expires), and "stream_1_instance_1", {stream: 1, instance: 1}, for
//     listing;
//   - dead letters: "expiresAt_ttl", a TTL index on expiresAt, and
//     "stream_1_instance_1_createdAt_1", {stream: 1, instance: 1, createdAt: 1}, for listing;
//   - gaps: "stream_1_instance_1_at_1", {stream: 1, instance: 1, at: 1}, for listing.
//
// Earlier versions created "stream_1_createdAt_1" on the dead letters and "stream_1_at_1" on
// the gaps; EnsureIndexes leaves them alone (they can be dropped once no earlier version runs).
func (s *Store) EnsureIndexes(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.checkpoints.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{
			Keys:    bson.D{{Key: "expiresAt", Value: 1}},
			Options: options.Index().SetName(indexCheckpointTTL).SetExpireAfterSeconds(0),
		},
		{
			Keys:    bson.D{{Key: "stream", Value: 1}, {Key: "instance", Value: 1}},
			Options: options.Index().SetName(indexCheckpointStream),
		},
	})
	if err != nil {
		return wrap(ctx, err, "create checkpoint indexes on %s", s.checkpoints.Name())
	}
	_, err = s.deadLetters.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{
			Keys:    bson.D{{Key: "expiresAt", Value: 1}},
			Options: options.Index().SetName(indexDeadLetterTTL).SetExpireAfterSeconds(0),
		},
		{
			Keys:    bson.D{{Key: "stream", Value: 1}, {Key: "instance", Value: 1}, {Key: "createdAt", Value: 1}},
			Options: options.Index().SetName(indexDeadLetterStream),
		},
	})
	if err != nil {
		return wrap(ctx, err, "create dead-letter indexes on %s", s.deadLetters.Name())
	}
	_, err = s.gaps.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "stream", Value: 1}, {Key: "instance", Value: 1}, {Key: "at", Value: 1}},
		Options: options.Index().SetName(indexGapStream),
	})
	if err != nil {
		return wrap(ctx, err, "create gap index on %s", s.gaps.Name())
	}
	return nil
}

// wrap describes a failed operation. If ctx is done, the result matches ctx.Err() even when the
// driver's error does not say so.
// recordDoc is a stored document that converts to its record of package store.
type recordDoc[R any] interface{ record() R }

// findRecords returns the records of the documents of coll that filter matches, in the order
// opts sort them; what names the call in the error ("list gaps of orders").
func findRecords[R any, D recordDoc[R]](ctx context.Context, coll *mongo.Collection, what string, filter any, opts ...options.Lister[options.FindOptions]) ([]R, error) {
	cur, err := coll.Find(ctx, filter, opts...)
	if err != nil {
		return nil, wrap(ctx, err, "%s", what)
	}
	var docs []D
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(ctx, err, "%s", what)
	}
	out := make([]R, len(docs))
	for i, d := range docs {
		out[i] = d.record()
	}
	return out, nil
}

func wrap(ctx context.Context, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("mongostore: %s: %w (%v)", msg, cerr, err)
	}
	return fmt.Errorf("mongostore: %s: %w", msg, err)
}
