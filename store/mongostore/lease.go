package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store"
)

// leaseDoc is a lease document of _wt_leases.
type leaseDoc struct {
	ID         string    `bson:"_id"`
	Owner      string    `bson:"owner"`
	Epoch      int64     `bson:"epoch"`
	AcquiredAt time.Time `bson:"acquiredAt"`
	ExpiresAt  time.Time `bson:"expiresAt"`
	// WrittenAt is the server's $$NOW of the latest acquire, renew or release, and ServerNow
	// the $$NOW of a read; neither is part of the record's meaning, both give Remaining.
	WrittenAt time.Time `bson:"writtenAt,omitempty"`
	ServerNow time.Time `bson:"serverNow,omitempty"`
}

func (d leaseDoc) lease(now time.Time) store.Lease {
	l := store.Lease{Name: d.ID, Owner: d.Owner, Epoch: d.Epoch, AcquiredAt: d.AcquiredAt, ExpiresAt: d.ExpiresAt, ServerNow: now}
	if rem := d.ExpiresAt.Sub(now); l.Owner != "" && rem > 0 {
		l.Remaining = rem
	}
	return l
}

// now is the server's clock in pipeline updates and aggregations.
const now = "$$NOW"

// expiresIn is the server-side expression "server now + ttl".
func expiresIn(ttl time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{now, ttl.Milliseconds()}}}
}

// Acquire takes the lease of name for owner for ttl, in one atomic conditional upsert judged by
// the server's clock: a findAndModify whose filter matches only a free lease (expired by
// $$NOW, released, or already the owner's) and whose pipeline update increments the epoch and
// sets acquiredAt and expiresAt from $$NOW. The record is created with epoch 1 when missing.
// When another owner holds it unexpired, the upsert's insert collides on _id (DuplicateKey) and
// Acquire returns the holder's lease with an error matching store.ErrLeaseHeld. Re-acquiring
// one's own unexpired lease starts a new epoch (an older incarnation of the owner is fenced).
func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	if owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("mongostore: acquire lease %q: owner must not be empty and ttl must be positive (owner %q, ttl %v)", name, owner, ttl)
	}
	free := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "$lte", Value: bson.A{"$expiresAt", now}}},
		bson.D{{Key: "$eq", Value: bson.A{"$owner", ""}}},
		bson.D{{Key: "$eq", Value: bson.A{"$owner", owner}}},
	}}}
	filter := bson.D{{Key: "_id", Value: name}, {Key: "$expr", Value: free}}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "owner", Value: owner},
		{Key: "epoch", Value: bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$epoch", int64(0)}}}, int64(1)}}}},
		{Key: "acquiredAt", Value: now},
		{Key: "expiresAt", Value: expiresIn(ttl)},
		{Key: "writtenAt", Value: now},
	}}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	var err error
	// A DuplicateKey on the first try may be a concurrent first acquisition (both filters ran
	// before the document existed); the retry sees the document and decides.
	for range 2 {
		var d leaseDoc
		err = s.leases.FindOneAndUpdate(ctx, filter, update, opts).Decode(&d)
		if err == nil {
			return d.lease(d.WrittenAt), nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return store.Lease{}, wrap(ctx, err, "acquire lease %q for %q", name, owner)
		}
	}
	held, _, gerr := s.GetLease(ctx, name)
	if gerr != nil {
		return store.Lease{}, fmt.Errorf("mongostore: acquire lease %q for %q: %w (reading the holder: %v)", name, owner, store.ErrLeaseHeld, gerr)
	}
	return held, fmt.Errorf("mongostore: acquire lease %q for %q: held by %q (epoch %d, %v left): %w",
		name, owner, held.Owner, held.Epoch, held.Remaining, store.ErrLeaseHeld)
}

// Renew extends owner's lease of name under epoch to server now + ttl. It fails with
// store.ErrLeaseLost, changing nothing, unless owner holds it under that epoch and it has not
// expired by the server's clock.
func (s *Store) Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	filter := bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "epoch", Value: epoch},
		{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{"$expiresAt", now}}}}}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "expiresAt", Value: expiresIn(ttl)},
		{Key: "writtenAt", Value: now},
	}}}}
	var d leaseDoc
	err := s.leases.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.Lease{}, s.lostError(ctx, "renew", name, owner, epoch)
	}
	if err != nil {
		return store.Lease{}, wrap(ctx, err, "renew lease %q for %q (epoch %d)", name, owner, epoch)
	}
	return d.lease(d.WrittenAt), nil
}

// Release gives up owner's lease of name under epoch at once: the owner is cleared and the
// lease expires now (server clock); the epoch stays, so the next acquisition gets a higher one.
// It fails with store.ErrLeaseLost, changing nothing, when owner does not hold that epoch.
func (s *Store) Release(ctx context.Context, name, owner string, epoch int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	filter := bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "epoch", Value: epoch}}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "owner", Value: ""},
		{Key: "expiresAt", Value: now},
		{Key: "writtenAt", Value: now},
	}}}}
	res, err := s.leases.UpdateOne(ctx, filter, update)
	if err != nil {
		return wrap(ctx, err, "release lease %q of %q (epoch %d)", name, owner, epoch)
	}
	if res.MatchedCount == 0 {
		return s.lostError(ctx, "release", name, owner, epoch)
	}
	return nil
}

// GetLease reads the lease of name with the server's current time (an aggregation adding
// $$NOW), so Remaining is judged by the server's clock; ok is false when no record exists.
func (s *Store) GetLease(ctx context.Context, name string) (store.Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, false, err
	}
	cur, err := s.leases.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: name}}}},
		{{Key: "$addFields", Value: bson.D{{Key: "serverNow", Value: now}}}},
	})
	if err != nil {
		return store.Lease{}, false, wrap(ctx, err, "read lease %q", name)
	}
	var docs []leaseDoc
	if err := cur.All(ctx, &docs); err != nil {
		return store.Lease{}, false, wrap(ctx, err, "read lease %q", name)
	}
	if len(docs) == 0 {
		return store.Lease{}, false, nil
	}
	return docs[0].lease(docs[0].ServerNow), true, nil
}

func (s *Store) lostError(ctx context.Context, verb, name, owner string, epoch int64) error {
	cur, ok, err := s.GetLease(ctx, name)
	switch {
	case err != nil:
		return fmt.Errorf("mongostore: %s lease %q of %q (epoch %d): %w", verb, name, owner, epoch, store.ErrLeaseLost)
	case !ok:
		return fmt.Errorf("mongostore: %s lease %q of %q (epoch %d): no such lease: %w", verb, name, owner, epoch, store.ErrLeaseLost)
	default:
		return fmt.Errorf("mongostore: %s lease %q of %q (epoch %d): now owner %q, epoch %d, %v left: %w",
			verb, name, owner, epoch, cur.Owner, cur.Epoch, cur.Remaining, store.ErrLeaseLost)
	}
}

// WatchLease returns a channel that receives a value (changes coalesce) whenever the lease
// record of name changes on the server, and is closed when ctx ends. All the watches of one
// Store share a single change stream on the lease collection (leaseFeed): a watch per
// lease would hold a connection per SingleLeader stream in a getMore, and past about half the
// driver's maxPoolSize (100) those exhaust the pool and starve the lease renewals themselves.
// A failed change stream is reopened after a second; the watch is an accelerator (the caller
// still polls), so nothing is lost while it is down.
func (s *Store) WatchLease(ctx context.Context, name string) <-chan struct{} {
	return s.watches.Watch(ctx, name, s.leaseFeed)
}

// instanceDoc is a heartbeat document of _wt_instances.
type instanceDoc struct {
	ID        string    `bson:"_id"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// Heartbeat records that instance id is alive until server now + ttl (an upsert by _id).
func (s *Store) Heartbeat(ctx context.Context, id string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.instances.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: expiresIn(ttl)}}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return wrap(ctx, err, "heartbeat of instance %q", id)
	}
	return nil
}

// Instances lists the instances whose heartbeat has not expired by the server's clock, by ID.
func (s *Store) Instances(ctx context.Context) ([]store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cur, err := s.instances.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{"$expiresAt", now}}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	})
	if err != nil {
		return nil, wrap(ctx, err, "list instances")
	}
	var docs []instanceDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(ctx, err, "list instances")
	}
	out := make([]store.Instance, len(docs))
	for i, d := range docs {
		out[i] = store.Instance{ID: d.ID, ExpiresAt: d.ExpiresAt}
	}
	return out, nil
}

// Leave removes instance id's heartbeat at once (a graceful shutdown), so the others take
// over its share without waiting for the record to expire.
func (s *Store) Leave(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.instances.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return wrap(ctx, err, "remove instance %q", id)
	}
	return nil
}
