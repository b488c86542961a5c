package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/watchtree/watchtree/store"
)

// Leases is the in-memory lease store and instance registry (store.LeaseStore): for users'
// own tests and for running several runtimes in one process without MongoDB or Redis. Its clock
// (Options.Now) plays the lease server's clock. It passes the store/storetest lease contract.
// Create it with NewLeases; it is safe for concurrent use.
type Leases struct {
	now func() time.Time

	mu        sync.Mutex
	leases    map[string]store.Lease
	instances map[string]time.Time
	watchers  map[string][]chan struct{}
}

// NewLeases returns an empty lease store; opts.Now (default time.Now) judges expiry.
func NewLeases(opts Options) *Leases {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Leases{now: opts.Now, leases: map[string]store.Lease{}, instances: map[string]time.Time{},
		watchers: map[string][]chan struct{}{}}
}

// view is l as seen now.
func (s *Leases) view(l store.Lease) store.Lease {
	l.ServerNow = s.now()
	l.Remaining = 0
	if rem := l.ExpiresAt.Sub(l.ServerNow); l.Owner != "" && rem > 0 {
		l.Remaining = rem
	}
	return l
}

// notify wakes the watchers of name; under s.mu.
func (s *Leases) notify(name string) {
	for _, ch := range s.watchers[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Acquire takes the lease when it is free or owner's own, with the next epoch; else
// store.ErrLeaseHeld with the holder's lease.
func (s *Leases) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	if owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("memstore: acquire lease %q: owner must not be empty and ttl must be positive", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.view(s.leases[name])
	if cur.Held() && cur.Owner != owner {
		return cur, fmt.Errorf("memstore: acquire lease %q for %q: held by %q (epoch %d): %w", name, owner, cur.Owner, cur.Epoch, store.ErrLeaseHeld)
	}
	now := s.now()
	l := store.Lease{Name: name, Owner: owner, Epoch: cur.Epoch + 1, AcquiredAt: now, ExpiresAt: now.Add(ttl)}
	s.leases[name] = l
	s.notify(name)
	return s.view(l), nil
}

// Renew extends owner's unexpired lease under epoch; else store.ErrLeaseLost.
func (s *Leases) Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.view(s.leases[name])
	if !cur.Held() || cur.Owner != owner || cur.Epoch != epoch {
		return store.Lease{}, fmt.Errorf("memstore: renew lease %q of %q (epoch %d): now owner %q, epoch %d: %w",
			name, owner, epoch, cur.Owner, cur.Epoch, store.ErrLeaseLost)
	}
	l := s.leases[name]
	l.ExpiresAt = s.now().Add(ttl)
	s.leases[name] = l
	return s.view(l), nil
}

// Release frees owner's lease under epoch (the epoch stays); else store.ErrLeaseLost.
func (s *Leases) Release(ctx context.Context, name, owner string, epoch int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[name]
	if !ok || l.Owner != owner || l.Epoch != epoch {
		return fmt.Errorf("memstore: release lease %q of %q (epoch %d): now owner %q, epoch %d: %w",
			name, owner, epoch, l.Owner, l.Epoch, store.ErrLeaseLost)
	}
	l.Owner, l.ExpiresAt = "", s.now()
	s.leases[name] = l
	s.notify(name)
	return nil
}

// GetLease reads the lease; ok is false when it never existed.
func (s *Leases) GetLease(ctx context.Context, name string) (store.Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[name]
	if !ok {
		return store.Lease{}, false, nil
	}
	return s.view(l), true, nil
}

// WatchLease notifies on every acquisition and release of name until ctx ends (expiries are
// not notified: the leader actor retries at the expiry it saw).
func (s *Leases) WatchLease(ctx context.Context, name string) <-chan struct{} {
	in := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers[name] = append(s.watchers[name], in)
	s.mu.Unlock()
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			s.watchers[name] = slices.DeleteFunc(s.watchers[name], func(c chan struct{}) bool { return c == in })
			s.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// Heartbeat records instance id as alive for ttl.
func (s *Leases) Heartbeat(ctx context.Context, id string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.instances[id] = s.now().Add(ttl)
	s.mu.Unlock()
	return nil
}

// Instances lists the live instances by ID.
func (s *Leases) Instances(ctx context.Context) ([]store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := []store.Instance{}
	for id, exp := range s.instances {
		if exp.After(now) {
			out = append(out, store.Instance{ID: id, ExpiresAt: exp})
		}
	}
	slices.SortFunc(out, func(a, b store.Instance) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// Leave removes instance id's heartbeat.
func (s *Leases) Leave(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.instances, id)
	s.mu.Unlock()
	return nil
}
