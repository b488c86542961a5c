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
// previous one, unless the stored Epoch is higher than cp.Epoch: then it fails with an error
// matching store.ErrFenced and changes nothing. An expired record fences nothing: it is gone.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := s.enter(ctx, OpSave); err != nil {
		return err
	}
	s.saves.Add(1)
	cp = cp.Clone()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.checkpoints[cp.Scope()]; ok && !old.Expired(now) && old.Epoch > cp.Epoch {
		s.fenced.Add(1)
		return fmt.Errorf("memstore: save checkpoint of %s with epoch %d, stored epoch %d: %w",
			cp.Scope(), cp.Epoch, old.Epoch, store.ErrFenced)
	}
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
	s.mu.Lock()
	var out []store.Checkpoint
	for k, cp := range s.checkpoints {
		if k.Stream == stream && !cp.Expired(now) {
			out = append(out, cp.Clone())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Checkpoint) int { return cmp.Compare(a.Instance, b.Instance) })
	return out, nil
}
