package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/watchtree/watchtree/store"
)

// Load returns the checkpoint of scope (a copy); ok is false if there is none or it has
// expired (its ExpiresAt is before the store's clock).
func (s *Store) Load(ctx context.Context, scope store.Scope) (store.Checkpoint, bool, error) {
	if err := s.enter(ctx, OpLoad); err != nil {
		return store.Checkpoint{}, false, err
	}
	s.loads.Add(1)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	cp, ok := s.checkpoints[scope]
	if !ok || cp.Expired(now) {
		return store.Checkpoint{}, false, nil
	}
	return cp.Clone(), true, nil
}

// Save stores a copy of cp as the checkpoint of its scope (Stream, Instance), replacing the
// previous one, unless the stored Epoch is higher than cp.Epoch (an error matching
// store.ErrFenced) or, under the same Epoch, cp is not a Rewind and its position sorts before
// the stored one (store.ErrBackward); then it changes nothing. An expired record refuses
// nothing: it is gone.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := s.enter(ctx, OpSave); err != nil {
		return err
	}
	s.saves.Add(1)
	cp = cp.Clone()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.checkpoints[cp.Scope()]; ok && !old.Expired(now) {
		if old.Epoch > cp.Epoch {
			s.fenced.Add(1)
			return fmt.Errorf("memstore: save checkpoint of %s with epoch %d, stored epoch %d: %w",
				cp.Scope(), cp.Epoch, old.Epoch, store.ErrFenced)
		}
		if c, ok := store.ComparePositions(cp, old); ok && c < 0 && old.Epoch == cp.Epoch && !cp.Rewind {
			return fmt.Errorf("memstore: save checkpoint of %s at %s, behind the stored %s (epoch %d): %w",
				cp.Scope(), store.DescribePosition(cp), store.DescribePosition(old), cp.Epoch, store.ErrBackward)
		}
	}
	cp.Rewind = false
	s.checkpoints[cp.Scope()] = cp
	return nil
}

// ListCheckpoints returns copies of the unexpired checkpoints of the stream: the shared one
// first (Instance ""), then the instances' by name.
func (s *Store) ListCheckpoints(ctx context.Context, stream string) ([]store.Checkpoint, error) {
	if err := s.enter(ctx, OpListCheckpoints); err != nil {
		return nil, err
	}
	now := s.now()
	out := matching(s, s.checkpoints, func(k store.Scope, cp store.Checkpoint) bool { return k.Stream == stream && !cp.Expired(now) })
	slices.SortFunc(out, func(a, b store.Checkpoint) int { return cmp.Compare(a.Instance, b.Instance) })
	return out, nil
}
