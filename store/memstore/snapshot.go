package memstore

import (
	"context"

	"github.com/watchtree/watchtree/store"
)

// LoadSnapshot returns scope's snapshot record (a copy); ok is false if there is none.
func (s *Store) LoadSnapshot(ctx context.Context, scope store.Scope) (store.Snapshot, bool, error) {
	if err := s.enter(ctx, OpLoadSnapshot); err != nil {
		return store.Snapshot{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[scope]
	if !ok {
		return store.Snapshot{}, false, nil
	}
	return sn.Clone(), true, nil
}

// SaveSnapshot stores a copy of sn as its scope's snapshot record, replacing the previous one.
func (s *Store) SaveSnapshot(ctx context.Context, sn store.Snapshot) error {
	if err := s.enter(ctx, OpSaveSnapshot); err != nil {
		return err
	}
	sn = sn.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshots[sn.Scope()] = sn
	return nil
}
