package watchtree

import (
	"context"
	"fmt"

	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// storeSet is the stores of the streams that share a store database and dead-letter
// collection: Config's stores where set, the default MongoDB store for the others (see the
// store fields of Config for each default).
type storeSet struct {
	checkpoints store.CheckpointStore
	deadLetters store.DeadLetterStore
	gaps        store.GapStore
	// snapshots is Config.Snapshots, else the default MongoDB store when Config.Checkpoints is
	// nil too; nil otherwise (a stream that snapshots is refused).
	snapshots store.SnapshotStore
	leases    store.LeaseStore
	// mongo is the default store behind the stores Config leaves nil; nil when Config sets them
	// all, or when the set has no database (its streams need no default store).
	mongo *mongostore.Store
	// indexed reports whether mongo keeps records that need indexes (checkpoints, dead letters
	// or gaps): the runtime then creates them.
	indexed bool
}

// newStoreSet returns the stores of database and dead-letter collection deadLetters: Config's
// where set, a mongostore on Config.Client for the others. It does no I/O.
func newStoreSet(cfg Config, database, deadLetters string) (*storeSet, error) {
	st := &storeSet{checkpoints: cfg.Checkpoints, deadLetters: cfg.DeadLetters, gaps: cfg.Gaps,
		snapshots: cfg.Snapshots, leases: cfg.Leases}
	if database == "" || len(cfg.storeFields()) == 5 {
		return st, nil
	}
	ms, err := mongostore.New(cfg.Client.Database(database), mongostore.Options{DeadLetterCollection: deadLetters})
	if err != nil {
		return nil, fmt.Errorf("watchtree: store in %q: %w", database, err)
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

// EnsureIndexes creates the indexes of the default MongoDB store (idempotent) when it keeps
// checkpoints, dead letters or gaps; stores set by Config need none from the runtime.
func (s *storeSet) EnsureIndexes(ctx context.Context) error {
	if !s.indexed {
		return nil
	}
	return s.mongo.EnsureIndexes(ctx)
}

// needsStoreDatabase names the first store field a stream uses that Config leaves to the
// default MongoDB store, which needs a database; "" when Config sets every store the stream
// uses. (Snapshots has no default of its own: see Config.Snapshots.)
func (c Config) needsStoreDatabase(cs *engine.Spec) string {
	switch {
	case c.Checkpoints == nil:
		return "Checkpoints"
	case c.DeadLetters == nil:
		return "DeadLetters"
	case c.Gaps == nil:
		return "Gaps"
	case c.Leases == nil && cs.SingleLeader:
		return "Leases"
	}
	return ""
}
