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
// the stored epoch is higher than cp.Epoch (an error matching store.ErrFenced) or, under the
// same epoch, cp is not a Rewind and its position sorts before the stored one (an error
// matching store.ErrBackward, naming both positions); then it changes nothing. See the package
// doc for the filter and the DuplicateKey handling.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := checkpointID(cp.Scope())
	filter := bson.D{{Key: "_id", Value: id}, {Key: "$or", Value: saveConditions(cp, s.now())}}
	doc := toCheckpointDoc(cp)
	var err error
	// A DuplicateKey on the first try may come from a concurrent first save of the same scope
	// (the document did not exist when both filters ran). The retry sees the document: either it
	// matches, or the DuplicateKey really means that the stored record refuses the save.
	for range 2 {
		_, err = s.checkpoints.ReplaceOne(ctx, filter, doc, options.Replace().SetUpsert(true))
		if err == nil {
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return wrap(ctx, err, "save checkpoint of %s (epoch %d)", cp.Scope(), cp.Epoch)
		}
	}
	// The filter refused the save: read the stored record to say why. The read may see a
	// record written after the refusal; it can only be newer, so the verdict holds.
	var held checkpointDoc
	if err := s.checkpoints.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&held); err != nil {
		return wrap(ctx, err, "save checkpoint of %s (epoch %d): refused by the stored record, which could not be read", cp.Scope(), cp.Epoch)
	}
	stored := held.record()
	if stored.Epoch > cp.Epoch {
		return fmt.Errorf("mongostore: save checkpoint of %s with epoch %d, stored epoch %d: %w",
			cp.Scope(), cp.Epoch, stored.Epoch, store.ErrFenced)
	}
	if c, ok := store.ComparePositions(cp, stored); ok && c < 0 && stored.Epoch == cp.Epoch && !cp.Rewind {
		return fmt.Errorf("mongostore: save checkpoint of %s at %s, behind the stored %s (epoch %d): %w",
			cp.Scope(), store.DescribePosition(cp), store.DescribePosition(stored), cp.Epoch, store.ErrBackward)
	}
	// The stored record accepts the save now: it changed between the writes and the read (or
	// the DuplicateKeys had another cause). Not a refusal: the caller's retry decides.
	return fmt.Errorf("mongostore: save checkpoint of %s (epoch %d): two DuplicateKey answers, and the stored record (epoch %d, %s) does not refuse it",
		cp.Scope(), cp.Epoch, stored.Epoch, store.DescribePosition(stored))
}

// saveConditions are the alternatives of Save's filter under which the stored record of cp's
// scope may be replaced: it has no epoch (a record of an early version), it has expired, its
// epoch is lower, or its epoch is equal and cp's position does not sort before it (as
// store.ComparePositions orders them: by the tokens' _data strings when both have one, else by
// cluster time when both know one; incomparable positions, and a Rewind, always pass).
func saveConditions(cp store.Checkpoint, now time.Time) bson.A {
	sameEpoch := bson.D{{Key: "epoch", Value: cp.Epoch}}
	if !cp.Rewind {
		sameEpoch = append(sameEpoch, notBehind(cp)...)
	}
	return bson.A{
		bson.D{{Key: "epoch", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lt", Value: now}}}},
		bson.D{{Key: "epoch", Value: bson.D{{Key: "$lt", Value: cp.Epoch}}}},
		sameEpoch,
	}
}

// notBehind is the filter of a stored record whose position cp's does not sort before; empty
// when cp's position compares with none (no token data and no cluster time).
func notBehind(cp store.Checkpoint) bson.D {
	// A stored record without a cluster time, or at one not after cp's: by time, cp is not behind.
	var byTime bson.D
	if !cp.ClusterTime.IsZero() {
		byTime = bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "clusterTime", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "clusterTime", Value: bson.D{{Key: "$lte", Value: cp.ClusterTime}}}},
		}}}
	}
	var data string
	var ok bool
	if len(cp.Token) > 0 {
		data, ok = cp.Token.Lookup("_data").StringValueOK()
	}
	if !ok {
		return byTime // cp has no token data: positions compare by time alone
	}
	// The stored token's _data is a string not after cp's; or it has none (only strings
	// compare with a string), and the cluster times decide.
	noData := bson.D{{Key: "token._data", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "string"}}}}}}
	noData = append(noData, byTime...)
	return bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "token._data", Value: bson.D{{Key: "$lte", Value: data}}}},
		noData,
	}}}
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
	all, err := findRecords[store.Checkpoint, checkpointDoc](ctx, s.checkpoints, fmt.Sprintf("list checkpoints of stream %q", stream), filter)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, cp := range all {
		if cp.Stream != stream { // a shared checkpoint of another stream cannot match, but be strict
			continue
		}
		out = append(out, cp)
	}
	sortCheckpoints(out)
	return out, nil
}
