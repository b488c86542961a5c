package mongostore_test

import (
	"testing"
	"time"

	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/store/storetest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// The contract suites, each against one server (mongosim, or WATCHTREE_MONGODB_URI) with a
// fresh database per case.

func TestCheckpointContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestCheckpointStore(t, func(t *testing.T, now func() time.Time) storetest.CheckpointStore {
		s, _ := e.newStore(t, mongostore.Options{Now: now})
		return s
	})
}

func TestGapContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestGapStore(t, func(t *testing.T) storetest.GapStore {
		s, _ := e.newStore(t, mongostore.Options{})
		return s
	})
}

func TestDeadLetterContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestDeadLetterStore(t, func(t *testing.T, now func() time.Time) storetest.DeadLetterStore {
		s, _ := e.newStore(t, mongostore.Options{Now: now})
		return s
	})
}

func TestSnapshotContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestSnapshotStore(t, func(t *testing.T) storetest.SnapshotStore {
		s, _ := e.newStore(t, mongostore.Options{})
		return s
	})
}

func TestLeaseContract(t *testing.T) {
	e := newEnv(t, mongosim.Options{})
	storetest.TestLeaseStore(t, func(t *testing.T) storetest.LeaseStore {
		s, _ := e.newStore(t, mongostore.Options{})
		return s
	})
}
