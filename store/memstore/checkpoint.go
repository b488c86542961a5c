package memstore

import (
	"context"
	"fmt"

	"github.com/watchtree/watchtree/store"
)

// Load returns the stream's checkpoint (a copy); ok is false if there is none.
func (s *Store) Load(ctx context.Context, stream string) (store.Checkpoint, bool, error) {
	if err := s.enter(ctx, OpLoad); err != nil {
		return store.Checkpoint{}, false, err
	}
	s.loads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	cp, ok := s.checkpoints[stream]
	if !ok {
		return store.Checkpoint{}, false, nil
	}
	return cp.Clone(), true, nil
}

// Save stores a copy of cp as the stream's checkpoint, replacing the previous one, unless the
// stored Epoch is higher than cp.Epoch: then it fails with an error matching store.ErrFenced
// and changes nothing.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := s.enter(ctx, OpSave); err != nil {
		return err
	}
	s.saves.Add(1)
	cp = cp.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.checkpoints[cp.Stream]; ok && old.Epoch > cp.Epoch {
		s.fenced.Add(1)
		return fmt.Errorf("memstore: save checkpoint of stream %q with epoch %d, stored epoch %d: %w",
			cp.Stream, cp.Epoch, old.Epoch, store.ErrFenced)
	}
	s.checkpoints[cp.Stream] = cp
	return nil
}
