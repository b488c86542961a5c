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

// Load returns the stream's checkpoint; ok is false (err nil) if there is none.
func (s *Store) Load(ctx context.Context, stream string) (store.Checkpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Checkpoint{}, false, err
	}
	var d checkpointDoc
	err := s.checkpoints.FindOne(ctx, bson.D{{Key: "_id", Value: stream}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.Checkpoint{}, false, nil
	}
	if err != nil {
		return store.Checkpoint{}, false, wrap(ctx, err, "load checkpoint of stream %q", stream)
	}
	return d.record(), true, nil
}

// Save replaces the stream's checkpoint with cp in one atomic conditional upsert, unless the
// stored epoch is higher than cp.Epoch: then it fails with an error matching store.ErrFenced
// (naming the stored epoch when it can read it) and changes nothing. See the package doc for
// the filter and the DuplicateKey handling.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	filter := bson.D{
		{Key: "_id", Value: cp.Stream},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "epoch", Value: bson.D{{Key: "$lte", Value: cp.Epoch}}}},
			bson.D{{Key: "epoch", Value: bson.D{{Key: "$exists", Value: false}}}},
		}},
	}
	doc := toCheckpointDoc(cp)
	var err error
	// A DuplicateKey on the first try may come from a concurrent first save of the same stream
	// (the document did not exist when both filters ran). The retry sees the document: either it
	// matches (its epoch is not higher) or the DuplicateKey really means "fenced".
	for range 2 {
		_, err = s.checkpoints.ReplaceOne(ctx, filter, doc, options.Replace().SetUpsert(true))
		if err == nil {
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return wrap(ctx, err, "save checkpoint of stream %q (epoch %d)", cp.Stream, cp.Epoch)
		}
	}
	stored := "a higher one"
	var held struct {
		Epoch int64 `bson:"epoch"`
	}
	if s.checkpoints.FindOne(ctx, bson.D{{Key: "_id", Value: cp.Stream}},
		options.FindOne().SetProjection(bson.D{{Key: "epoch", Value: 1}})).Decode(&held) == nil {
		stored = fmt.Sprint(held.Epoch)
	}
	return fmt.Errorf("mongostore: save checkpoint of stream %q with epoch %d, stored epoch %s: %w",
		cp.Stream, cp.Epoch, stored, store.ErrFenced)
}
