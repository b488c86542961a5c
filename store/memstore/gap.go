package memstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/watchtree/watchtree/store"
)

// RecordGap stores a copy of g, replacing any gap with the same ID.
func (s *Store) RecordGap(ctx context.Context, g store.Gap) error {
	if err := s.enter(ctx, OpRecordGap); err != nil {
		return err
	}
	s.gaps.Add(1)
	g = g.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gapRecs[g.ID] = g
	return nil
}

// ListGaps returns copies of the gaps of scope in ascending At order, ties by ID.
func (s *Store) ListGaps(ctx context.Context, scope store.Scope) ([]store.Gap, error) {
	if err := s.enter(ctx, OpListGaps); err != nil {
		return nil, err
	}
	out := matching(s, s.gapRecs, func(_ string, g store.Gap) bool { return g.Scope() == scope })
	slices.SortFunc(out, func(a, b store.Gap) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}
