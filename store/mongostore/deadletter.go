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

// unexpired is the filter clause that hides expired records (dead letters, checkpoints) at now
// (the TTL monitor may not have deleted them yet).
func unexpired(now time.Time) bson.E {
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$gte", Value: now}}}},
	}}
}

// byKey is the filter of scope's unexpired dead letter id.
func (s *Store) byKey(scope store.Scope, id string) bson.D {
	return bson.D{{Key: "_id", Value: deadLetterKey{Stream: scope.Stream, Instance: scope.Instance, ID: id}}, unexpired(s.now())}
}

// scopeFilter selects the records of scope by their stream and instance fields: a shared
// scope's records have no instance field (as in earlier versions).
func scopeFilter(scope store.Scope) bson.D {
	inst := any(scope.Instance)
	if scope.Shared() {
		inst = bson.D{{Key: "$exists", Value: false}}
	}
	return bson.D{{Key: "stream", Value: scope.Stream}, {Key: "instance", Value: inst}}
}

func notFound(scope store.Scope, id string) error {
	return fmt.Errorf("mongostore: dead letter %q of %s: %w", id, scope, store.ErrNotFound)
}

// maxDocumentSize is the server's BSON document limit (16 MiB).
const maxDocumentSize = 16 * 1024 * 1024

// PutDeadLetter upserts dl by its key (dl.Stream, dl.Instance, dl.ID): a second put of the same
// key replaces the whole document; another scope's record of the same event ID is left alone.
// A record that would exceed the 16 MiB document limit is stored without its Event, with
// EventOmitted set (store.DeadLetter.EventOmitted).
func (s *Store) PutDeadLetter(ctx context.Context, dl store.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	doc, err := bson.Marshal(toDeadLetterDoc(dl))
	if err != nil {
		return fmt.Errorf("mongostore: put dead letter %q of %s: encode: %w", dl.ID, dl.Scope(), err)
	}
	if len(doc) > maxDocumentSize && len(dl.Event) > 0 {
		// The record cannot be stored with its event: keep the rest, which identifies the event.
		dl.Event, dl.EventOmitted = nil, true
		if doc, err = bson.Marshal(toDeadLetterDoc(dl)); err != nil {
			return fmt.Errorf("mongostore: put dead letter %q of %s: encode: %w", dl.ID, dl.Scope(), err)
		}
	}
	_, err = s.deadLetters.ReplaceOne(ctx, bson.D{{Key: "_id", Value: deadLetterKey{Stream: dl.Stream, Instance: dl.Instance, ID: dl.ID}}}, bson.Raw(doc),
		options.Replace().SetUpsert(true))
	if err != nil {
		return wrap(ctx, err, "put dead letter %q of %s", dl.ID, dl.Scope())
	}
	return nil
}

// ListDeadLetters returns up to limit (limit ≤ 0: all) unexpired dead letters of scope, oldest
// first: ascending createdAt, ties by ID (the _id sort compares the equal stream and instance
// first, then the event ID).
func (s *Store) ListDeadLetters(ctx context.Context, scope store.Scope, limit int) ([]store.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts := options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	return findRecords[store.DeadLetter, deadLetterDoc](ctx, s.deadLetters, fmt.Sprintf("list dead letters of %s", scope),
		append(scopeFilter(scope), unexpired(s.now())), opts)
}

// CountDeadLetters returns the number of scope's unexpired dead letters, counted by the server
// (the records are not read).
func (s *Store) CountDeadLetters(ctx context.Context, scope store.Scope) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.deadLetters.CountDocuments(ctx, append(scopeFilter(scope), unexpired(s.now())))
	if err != nil {
		return 0, wrap(ctx, err, "count dead letters of %q", scope.String())
	}
	return n, nil
}

// GetDeadLetter returns scope's dead letter with that ID; store.ErrNotFound if there is
// none or it has expired.
func (s *Store) GetDeadLetter(ctx context.Context, scope store.Scope, id string) (store.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return store.DeadLetter{}, err
	}
	var d deadLetterDoc
	err := s.deadLetters.FindOne(ctx, s.byKey(scope, id)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.DeadLetter{}, notFound(scope, id)
	}
	if err != nil {
		return store.DeadLetter{}, wrap(ctx, err, "get dead letter %q of %s", id, scope)
	}
	return d.record(), nil
}

// DeleteDeadLetter removes scope's dead letter with that ID; store.ErrNotFound if there is
// none or it has expired.
func (s *Store) DeleteDeadLetter(ctx context.Context, scope store.Scope, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := s.deadLetters.DeleteOne(ctx, s.byKey(scope, id))
	if err != nil {
		return wrap(ctx, err, "delete dead letter %q of %s", id, scope)
	}
	if res.DeletedCount == 0 {
		return notFound(scope, id)
	}
	return nil
}

// MarkReplayed increments the replayCount of scope's dead letter with that ID and sets its
// lastReplayAt to at, in one update; store.ErrNotFound if there is none or it has expired.
func (s *Store) MarkReplayed(ctx context.Context, scope store.Scope, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := s.deadLetters.UpdateOne(ctx, s.byKey(scope, id), bson.D{
		{Key: "$inc", Value: bson.D{{Key: "replayCount", Value: 1}}},
		{Key: "$set", Value: bson.D{{Key: "lastReplayAt", Value: at}}},
	})
	if err != nil {
		return wrap(ctx, err, "mark dead letter %q of %s replayed", id, scope)
	}
	if res.MatchedCount == 0 {
		return notFound(scope, id)
	}
	return nil
}
