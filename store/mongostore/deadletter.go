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

// unexpired is the filter clause that hides expired dead letters at now (the TTL monitor may
// not have deleted them yet).
func unexpired(now time.Time) bson.E {
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$gte", Value: now}}}},
	}}
}

// byKey is the filter of the stream's unexpired dead letter id.
func (s *Store) byKey(stream, id string) bson.D {
	return bson.D{{Key: "_id", Value: deadLetterKey{Stream: stream, ID: id}}, unexpired(s.now())}
}

func notFound(stream, id string) error {
	return fmt.Errorf("mongostore: dead letter %q of stream %q: %w", id, stream, store.ErrNotFound)
}

// maxDocumentSize is the server's BSON document limit (16 MiB).
const maxDocumentSize = 16 * 1024 * 1024

// PutDeadLetter upserts dl by its key (dl.Stream, dl.ID): a second put of the same pair replaces
// the whole document; another stream's record of the same event ID is left alone.
// A record that would exceed the 16 MiB document limit is stored without its Event, with
// EventOmitted set (store.DeadLetter.EventOmitted).
func (s *Store) PutDeadLetter(ctx context.Context, dl store.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	doc, err := bson.Marshal(toDeadLetterDoc(dl))
	if err != nil {
		return fmt.Errorf("mongostore: put dead letter %q of stream %q: encode: %w", dl.ID, dl.Stream, err)
	}
	if len(doc) > maxDocumentSize && len(dl.Event) > 0 {
		// The record cannot be stored with its event: keep the rest, which identifies the event.
		dl.Event, dl.EventOmitted = nil, true
		if doc, err = bson.Marshal(toDeadLetterDoc(dl)); err != nil {
			return fmt.Errorf("mongostore: put dead letter %q of stream %q: encode: %w", dl.ID, dl.Stream, err)
		}
	}
	_, err = s.deadLetters.ReplaceOne(ctx, bson.D{{Key: "_id", Value: deadLetterKey{Stream: dl.Stream, ID: dl.ID}}}, bson.Raw(doc),
		options.Replace().SetUpsert(true))
	if err != nil {
		return wrap(ctx, err, "put dead letter %q of stream %q", dl.ID, dl.Stream)
	}
	return nil
}

// ListDeadLetters returns up to limit (limit ≤ 0: all) unexpired dead letters of the stream,
// oldest first: ascending createdAt, ties by ID (the _id sort compares the equal stream first,
// then the event ID).
func (s *Store) ListDeadLetters(ctx context.Context, stream string, limit int) ([]store.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts := options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.deadLetters.Find(ctx, bson.D{{Key: "stream", Value: stream}, unexpired(s.now())}, opts)
	if err != nil {
		return nil, wrap(ctx, err, "list dead letters of stream %q", stream)
	}
	var docs []deadLetterDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(ctx, err, "list dead letters of stream %q", stream)
	}
	out := make([]store.DeadLetter, len(docs))
	for i, d := range docs {
		out[i] = d.record()
	}
	return out, nil
}

// CountDeadLetters returns the number of the stream's unexpired dead letters, counted by the
// server (the records are not read).
func (s *Store) CountDeadLetters(ctx context.Context, stream string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.deadLetters.CountDocuments(ctx, bson.D{{Key: "stream", Value: stream}, unexpired(s.now())})
	if err != nil {
		return 0, wrap(ctx, err, "count dead letters of stream %q", stream)
	}
	return n, nil
}

// GetDeadLetter returns the stream's dead letter with that ID; store.ErrNotFound if there is
// none or it has expired.
func (s *Store) GetDeadLetter(ctx context.Context, stream, id string) (store.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return store.DeadLetter{}, err
	}
	var d deadLetterDoc
	err := s.deadLetters.FindOne(ctx, s.byKey(stream, id)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.DeadLetter{}, notFound(stream, id)
	}
	if err != nil {
		return store.DeadLetter{}, wrap(ctx, err, "get dead letter %q of stream %q", id, stream)
	}
	return d.record(), nil
}

// DeleteDeadLetter removes the stream's dead letter with that ID; store.ErrNotFound if there is
// none or it has expired.
func (s *Store) DeleteDeadLetter(ctx context.Context, stream, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := s.deadLetters.DeleteOne(ctx, s.byKey(stream, id))
	if err != nil {
		return wrap(ctx, err, "delete dead letter %q of stream %q", id, stream)
	}
	if res.DeletedCount == 0 {
		return notFound(stream, id)
	}
	return nil
}

// MarkReplayed increments the replayCount of the stream's dead letter with that ID and sets its
// lastReplayAt to at, in one update; store.ErrNotFound if there is none or it has expired.
func (s *Store) MarkReplayed(ctx context.Context, stream, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := s.deadLetters.UpdateOne(ctx, s.byKey(stream, id), bson.D{
		{Key: "$inc", Value: bson.D{{Key: "replayCount", Value: 1}}},
		{Key: "$set", Value: bson.D{{Key: "lastReplayAt", Value: at}}},
	})
	if err != nil {
		return wrap(ctx, err, "mark dead letter %q of stream %q replayed", id, stream)
	}
	if res.MatchedCount == 0 {
		return notFound(stream, id)
	}
	return nil
}
