package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/watchtree/watchtree/store"
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// Now is the clock that decides the expiry of dead letters and checkpoints (a record is
	// expired once Now() is after its ExpiresAt). Default time.Now. Tests inject a fake clock's
	// Now.
	Now func() time.Time
}

// Op names a Store method, for SetFault.
type Op string

// The operations a fault can target.
const (
	OpLoad             Op = "Load"
	OpSave             Op = "Save"
	OpListCheckpoints  Op = "ListCheckpoints"
	OpRecordGap        Op = "RecordGap"
	OpListGaps         Op = "ListGaps"
	OpPutDeadLetter    Op = "PutDeadLetter"
	OpListDeadLetters  Op = "ListDeadLetters"
	OpGetDeadLetter    Op = "GetDeadLetter"
	OpDeleteDeadLetter Op = "DeleteDeadLetter"
	OpMarkReplayed     Op = "MarkReplayed"
	OpLoadSnapshot     Op = "LoadSnapshot"
	OpSaveSnapshot     Op = "SaveSnapshot"
)

// Fault is called at the start of every Store method (after the context check) with the
// method's context and name. A non-nil error is returned by the method as is, and the method
// changes nothing. A Fault may block (e.g. until ctx is done, to simulate a hung server); it is
// called without the Store's lock held.
type Fault func(ctx context.Context, op Op) error

// Stats counts the calls that reached the store (past the context check and the fault).
type Stats struct {
	// Saves counts Save calls, the fenced ones included; Fenced counts those refused with
	// store.ErrFenced. Saves - Fenced checkpoints were written.
	Saves, Fenced uint64
	// Loads counts Load calls.
	Loads uint64
	// Gaps counts RecordGap calls; DeadLetterPuts counts PutDeadLetter calls.
	Gaps, DeadLetterPuts uint64
}

// Store implements the record stores of package store; Leases the lease store.
var (
	_ store.CheckpointStore = (*Store)(nil)
	_ store.DeadLetterStore = (*Store)(nil)
	_ store.GapStore        = (*Store)(nil)
	_ store.SnapshotStore   = (*Store)(nil)
	_ store.LeaseStore      = (*Leases)(nil)
)

// Store is the in-memory store. Create it with New.
type Store struct {
	now   func() time.Time
	fault atomic.Pointer[Fault]

	saves, fenced, loads, gaps, puts atomic.Uint64

	mu          sync.Mutex
	checkpoints map[store.Scope]store.Checkpoint
	gapRecs     map[string]store.Gap
	deadLetters map[dlKey]store.DeadLetter
	snapshots   map[store.Scope]store.Snapshot
}

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{
		now:         opts.Now,
		checkpoints: make(map[store.Scope]store.Checkpoint),
		gapRecs:     make(map[string]store.Gap),
		deadLetters: make(map[dlKey]store.DeadLetter),
		snapshots:   make(map[store.Scope]store.Snapshot),
	}
}

// SetFault installs f (nil removes it). It takes effect for calls that start afterwards.
func (s *Store) SetFault(f Fault) {
	if f == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&f)
}

// Stats returns the call counters.
func (s *Store) Stats() Stats {
	return Stats{
		Saves: s.saves.Load(), Fenced: s.fenced.Load(), Loads: s.loads.Load(),
		Gaps: s.gaps.Load(), DeadLetterPuts: s.puts.Load(),
	}
}

// enter checks ctx and runs the fault, if any.
// matching returns copies of the records of m (one of s's maps, set once by New) that keep
// accepts, read under s's lock, in no particular order.
func matching[K comparable, R interface{ Clone() R }](s *Store, m map[K]R, keep func(K, R) bool) []R {
	s.mu.Lock()
	var out []R
	for k, r := range m {
		if keep(k, r) {
			out = append(out, r)
		}
	}
	s.mu.Unlock()
	// The records are cloned outside the lock: a stored record's bytes are never changed in
	// place (a write stores a new copy), so reading them needs no lock.
	for i := range out {
		out[i] = out[i].Clone()
	}
	return out
}

func (s *Store) enter(ctx context.Context, op Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f := s.fault.Load(); f != nil {
		if err := (*f)(ctx, op); err != nil {
			return err
		}
		// A blocking fault may have outlived the context.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
