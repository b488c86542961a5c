package mongostore_test

import (
	"testing"
	"time"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/store/storetest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// The contract suites, each against one server (mongosim, or WATCHTREE_MONGODB_URI) with a
// fresh database per case.

func TestCheckpointContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestCheckpointStore(t, func(t *testing.T, now func() time.Time) store.CheckpointStore {
		s, _ := e.newStore(t, mongostore.Options{Now: now})
		return s
	})
}

func TestGapContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestGapStore(t, func(t *testing.T) store.GapStore {
		s, _ := e.newStore(t, mongostore.Options{})
		return s
	})
}

func TestDeadLetterContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestDeadLetterStore(t, func(t *testing.T, now func() time.Time) store.DeadLetterStore {
		s, _ := e.newStore(t, mongostore.Options{Now: now})
		return s
	})
}

func TestSnapshotContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestSnapshotStore(t, func(t *testing.T) store.SnapshotStore {
		s, _ := e.newStore(t, mongostore.Options{})
		return s
	})
}

func TestLeaseContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestLeaseStore(t, func(t *testing.T) store.LeaseStore {
		s, _ := e.newStore(t, mongostore.Options{})
		return s
	})
}
