package mongostore

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store"
)

// Load returns the checkpoint of scope; ok is false (err nil) if there is none or it has
// expired (the TTL monitor may not have deleted it yet).
func (s *Store) Load(ctx context.Context, scope store.Scope) (store.Checkpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Checkpoint{}, false, err
	}
	var d checkpointDoc
	err := s.checkpoints.FindOne(ctx, bson.D{{Key: "_id", Value: checkpointID(scope)}, unexpired(s.now())}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.Checkpoint{}, false, nil
	}
	if err != nil {
		return store.Checkpoint{}, false, wrap(ctx, err, "load checkpoint of %s", scope)
	}
	return d.record(), true, nil
}

// Save replaces the checkpoint of cp's scope with cp in one atomic conditional upsert, unless
// the stored epoch is higher than cp.Epoch: then it fails with an error matching
// store.ErrFenced (naming the stored epoch when it can read it) and changes nothing. See the
// package doc for the filter and the DuplicateKey handling.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := checkpointID(cp.Scope())
	filter := bson.D{
		{Key: "_id", Value: id},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "epoch", Value: bson.D{{Key: "$lte", Value: cp.Epoch}}}},
			bson.D{{Key: "epoch", Value: bson.D{{Key: "$exists", Value: false}}}},
		}},
	}
	doc := toCheckpointDoc(cp)
	var err error
	// A DuplicateKey on the first try may come from a concurrent first save of the same scope
	// (the document did not exist when both filters ran). The retry sees the document: either it
	// matches (its epoch is not higher) or the DuplicateKey really means "fenced".
	for range 2 {
		_, err = s.checkpoints.ReplaceOne(ctx, filter, doc, options.Replace().SetUpsert(true))
		if err == nil {
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return wrap(ctx, err, "save checkpoint of %s (epoch %d)", cp.Scope(), cp.Epoch)
		}
	}
	stored := "a higher one"
	var held struct {
		Epoch int64 `bson:"epoch"`
	}
	if s.checkpoints.FindOne(ctx, bson.D{{Key: "_id", Value: id}},
		options.FindOne().SetProjection(bson.D{{Key: "epoch", Value: 1}})).Decode(&held) == nil {
		stored = fmt.Sprint(held.Epoch)
	}
	return fmt.Errorf("mongostore: save checkpoint of %s with epoch %d, stored epoch %s: %w",
		cp.Scope(), cp.Epoch, stored, store.ErrFenced)
}

// ListCheckpoints returns the unexpired checkpoints of the stream: the shared one first
// (_id = the stream name, Instance ""), then the instances' ({_id: {stream, instance}}) by
// instance name. The instances' are found through the index {stream: 1, instance: 1}.
func (s *Store) ListCheckpoints(ctx context.Context, stream string) ([]store.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	filter := bson.D{
		{Key: "$and", Value: bson.A{
			bson.D{{Key: "$or", Value: bson.A{
				bson.D{{Key: "_id", Value: stream}},
				bson.D{{Key: "stream", Value: stream}},
			}}},
			bson.D{unexpired(s.now())},
		}},
	}
	cur, err := s.checkpoints.Find(ctx, filter)
	if err != nil {
		return nil, wrap(ctx, err, "list checkpoints of stream %q", stream)
	}
	var docs []checkpointDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(ctx, err, "list checkpoints of stream %q", stream)
	}
	out := make([]store.Checkpoint, 0, len(docs))
	for _, d := range docs {
		cp := d.record()
		if cp.Stream != stream { // a shared checkpoint of another stream cannot match, but be strict
			continue
		}
		out = append(out, cp)
	}
	sortCheckpoints(out)
	return out, nil
}
