package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store"
)

// RecordGap upserts g by g.ID (a retried write never duplicates).
func (s *Store) RecordGap(ctx context.Context, g store.Gap) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.gaps.ReplaceOne(ctx, bson.D{{Key: "_id", Value: g.ID}}, toGapDoc(g), options.Replace().SetUpsert(true))
	if err != nil {
		return wrap(ctx, err, "record gap %q of %s", g.ID, g.Scope())
	}
	return nil
}

// ListGaps returns the gaps of scope in ascending At order, ties by ID.
func (s *Store) ListGaps(ctx context.Context, scope store.Scope) ([]store.Gap, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return findRecords[store.Gap, gapDoc](ctx, s.gaps, fmt.Sprintf("list gaps of %s", scope), scopeFilter(scope),
		options.Find().SetSort(bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}))
}
