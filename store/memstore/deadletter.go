package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/watchtree/watchtree/store"
)

// expired reports whether dl's retention has run out at now.
func expired(dl store.DeadLetter, now time.Time) bool {
	return !dl.ExpiresAt.IsZero() && now.After(dl.ExpiresAt)
}

// dlKey is a dead letter's key: one record per scope and event ID.
type dlKey struct {
	scope store.Scope
	id    string
}

// PutDeadLetter stores a copy of dl, replacing any dead letter with the same Stream, Instance
// and ID (idempotent by that key; another scope's record of the same event is left alone).
func (s *Store) PutDeadLetter(ctx context.Context, dl store.DeadLetter) error {
	if err := s.enter(ctx, OpPutDeadLetter); err != nil {
		return err
	}
	s.puts.Add(1)
	dl = dl.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadLetters[dlKey{dl.Scope(), dl.ID}] = dl
	return nil
}

// CountDeadLetters returns the number of scope's unexpired dead letters.
func (s *Store) CountDeadLetters(ctx context.Context, scope store.Scope) (int64, error) {
	if err := s.enter(ctx, OpListDeadLetters); err != nil {
		return 0, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, dl := range s.deadLetters {
		if dl.Scope() == scope && !expired(dl, now) {
			n++
		}
	}
	return n, nil
}

// ListDeadLetters returns copies of up to limit (limit ≤ 0: all) unexpired dead letters of
// scope, oldest first: ascending CreatedAt, ties by ID.
func (s *Store) ListDeadLetters(ctx context.Context, scope store.Scope, limit int) ([]store.DeadLetter, error) {
	if err := s.enter(ctx, OpListDeadLetters); err != nil {
		return nil, err
	}
	now := s.now()
	out := matching(s, s.deadLetters, func(_ dlKey, dl store.DeadLetter) bool { return dl.Scope() == scope && !expired(dl, now) })
	slices.SortFunc(out, func(a, b store.DeadLetter) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// GetDeadLetter returns a copy of scope's dead letter with that ID; store.ErrNotFound if
// there is none or it has expired.
func (s *Store) GetDeadLetter(ctx context.Context, scope store.Scope, id string) (store.DeadLetter, error) {
	var out store.DeadLetter
	err := s.onDeadLetter(ctx, OpGetDeadLetter, scope, id, func(_ dlKey, dl store.DeadLetter) { out = dl.Clone() })
	return out, err
}

// DeleteDeadLetter removes scope's dead letter with that ID; store.ErrNotFound if there is
// none or it has expired.
func (s *Store) DeleteDeadLetter(ctx context.Context, scope store.Scope, id string) error {
	return s.onDeadLetter(ctx, OpDeleteDeadLetter, scope, id, func(k dlKey, _ store.DeadLetter) { delete(s.deadLetters, k) })
}

// MarkReplayed increments the ReplayCount of scope's dead letter with that ID and sets its
// LastReplayAt to at; store.ErrNotFound if there is none or it has expired.
func (s *Store) MarkReplayed(ctx context.Context, scope store.Scope, id string, at time.Time) error {
	return s.onDeadLetter(ctx, OpMarkReplayed, scope, id, func(k dlKey, dl store.DeadLetter) {
		dl.ReplayCount++
		dl.LastReplayAt = at
		s.deadLetters[k] = dl
	})
}

// onDeadLetter is the one-record calls' common part: it enters op and, under the lock, calls f
// with the key and value of scope's dead letter with that ID; store.ErrNotFound (f not called)
// if there is none or it has expired.
func (s *Store) onDeadLetter(ctx context.Context, op Op, scope store.Scope, id string, f func(k dlKey, dl store.DeadLetter)) error {
	if err := s.enter(ctx, op); err != nil {
		return err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := dlKey{scope, id}
	dl, ok := s.deadLetters[k]
	if !ok || expired(dl, now) {
		return notFound(scope, id)
	}
	f(k, dl)
	return nil
}

func notFound(scope store.Scope, id string) error {
	return fmt.Errorf("memstore: dead letter %q of %s: %w", id, scope, store.ErrNotFound)
}
