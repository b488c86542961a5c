package engine

import (
	"context"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// Stores are the store fields of watchtree.Config: each nil one is the default MongoDB store
// (see Config's fields for each default).
type Stores struct {
	Checkpoints store.CheckpointStore
	DeadLetters store.DeadLetterStore
	Gaps        store.GapStore
	Snapshots   store.SnapshotStore
	Leases      store.LeaseStore
}

// all reports whether every field is set: the runtime then needs no default store.
func (s Stores) all() bool {
	return s.Checkpoints != nil && s.DeadLetters != nil && s.Gaps != nil && s.Snapshots != nil && s.Leases != nil
}

// needsDatabase names the first store field spec uses that is left to the default MongoDB
// store, which needs a database; "" when every store spec uses is set. (Snapshots has no
// default of its own: see storeSet.Snapshots.)
func (s Stores) needsDatabase(spec *Spec) string {
	switch {
	case s.Checkpoints == nil:
		return "Checkpoints"
	case s.DeadLetters == nil:
		return "DeadLetters"
	case s.Gaps == nil:
		return "Gaps"
	case s.Leases == nil && spec.SingleLeader:
		return "Leases"
	}
	return ""
}

// storeSet is the stores of the streams that share a store database and dead-letter
// collection: Config's stores where set, the default MongoDB store for the others.
type storeSet struct {
	checkpoints store.CheckpointStore
	deadLetters store.DeadLetterStore
	gaps        store.GapStore
	// snapshots is Config.Snapshots, else the default MongoDB store when Config.Checkpoints is
	// nil too (the snapshot records go with the checkpoints); nil otherwise, and a stream that
	// snapshots is refused.
	snapshots store.SnapshotStore
	leases    store.LeaseStore

	key storeKey
	// mongo is the default store behind the stores Config leaves nil; nil when Config sets them
	// all, or when the set has no database (its streams need no default store).
	mongo *mongostore.Store
	// indexed reports whether mongo keeps records that need indexes (checkpoints, dead letters
	// or gaps): the runtime then creates them.
	indexed bool
}

// storeKey identifies one set of stores: the database of the default store's records and the
// dead-letter collection (DeadLetterPolicy.Collection).
type storeKey struct{ database, deadLetters string }

// newStoreSet returns the stores of k: stores where set, a mongostore on client for the others.
// It does no I/O.
func newStoreSet(client *mongo.Client, stores Stores, k storeKey) (*storeSet, error) {
	st := &storeSet{checkpoints: stores.Checkpoints, deadLetters: stores.DeadLetters, gaps: stores.Gaps,
		snapshots: stores.Snapshots, leases: stores.Leases, key: k}
	if k.database == "" || stores.all() {
		return st, nil
	}
	ms, err := mongostore.New(client.Database(k.database), mongostore.Options{DeadLetterCollection: k.deadLetters})
	if err != nil {
		return nil, fmt.Errorf("watchtree: store in %q: %w", k.database, err)
	}
	st.mongo = ms
	if st.checkpoints == nil {
		st.checkpoints, st.indexed = ms, true
		if st.snapshots == nil { // the snapshot records go with the checkpoints
			st.snapshots = ms
		}
	}
	if st.deadLetters == nil {
		st.deadLetters, st.indexed = ms, true
	}
	if st.gaps == nil {
		st.gaps, st.indexed = ms, true
	}
	if st.leases == nil {
		st.leases = ms
	}
	return st, nil
}

// StoreSets keeps a runtime's store sets, one per store database and dead-letter collection, and
// has the indexes of their default MongoDB stores created: once per client and set, by Start
// for Config.Database, in the background (indexer) for the others.
type StoreSets struct {
	client *mongo.Client
	stores Stores
	log    *zap.Logger

	mu   sync.Mutex
	sets map[storeKey]*storeSet
	idx  indexer
}

// newStoreSets returns the store sets of a runtime on client with Config's stores.
func newStoreSets(client *mongo.Client, stores Stores, log *zap.Logger) *StoreSets {
	return &StoreSets{client: client, stores: stores, log: log, sets: map[storeKey]*storeSet{}}
}

// get returns the stores of database and dead-letter collection deadLetters, creating them
// without I/O.
func (s *StoreSets) get(database, deadLetters string) (*storeSet, error) {
	k := storeKey{database, deadLetters}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.sets[k]; ok {
		return st, nil
	}
	st, err := newStoreSet(s.client, s.stores, k)
	if err != nil {
		return nil, err
	}
	s.sets[k] = st
	return st, nil
}

// indexedByRuntime caches the stores whose indexes were created, by client and store key.
var indexedByRuntime sync.Map

type indexKey struct {
	client *mongo.Client
	k      storeKey
}

// createIndexes creates the indexes of st's default MongoDB store now (idempotent), when it
// keeps checkpoints, dead letters or gaps; stores set by Config need none from the runtime.
func (s *StoreSets) createIndexes(ctx context.Context, st *storeSet) error {
	if !st.indexed {
		return nil
	}
	if err := st.mongo.EnsureIndexes(ctx); err != nil {
		return err
	}
	indexedByRuntime.Store(indexKey{client: s.client, k: st.key}, true)
	return nil
}

// createIndexesLater has the indexes of st created once per client, in the background (see
// indexer): it never waits on the server. A failure is logged and retried by the next call for
// the same store (the next Spawn that uses it): indexes only serve retention and listing, never
// correctness of the stream.
func (s *StoreSets) createIndexesLater(st *storeSet) {
	if !st.indexed {
		return // Config sets the stores that need indexes: none is the runtime's to index
	}
	key := indexKey{client: s.client, k: st.key}
	if _, ok := indexedByRuntime.Load(key); ok {
		return
	}
	s.idx.enqueue(indexJob{key: key, st: st.mongo, log: s.log})
}

// stop cancels the index creation in flight and waits for its goroutine (Runtime.Stop): no
// index creation outlives the runtime.
func (s *StoreSets) stop() { s.idx.stop() }

// IndexesPending returns the number of index creations queued or in flight.
func (s *StoreSets) IndexesPending() int {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	return len(s.idx.queued)
}

// IndexerDone reports whether the index goroutine has ended (or never started).
func (s *StoreSets) IndexerDone() bool {
	s.idx.mu.Lock()
	started, done := s.idx.started, s.idx.done
	s.idx.mu.Unlock()
	if !started {
		return true
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}
