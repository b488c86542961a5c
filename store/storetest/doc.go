// Package storetest holds the contract suites every store implementation must pass, one per
// store interface of package store: TestCheckpointStore, TestGapStore, TestDeadLetterStore,
// TestSnapshotStore and TestLeaseStore. An implementation's own tests call them with a
// constructor that returns a fresh, empty store per call:
//
//	func TestContract(t *testing.T) {
//		storetest.TestCheckpointStore(t, func(t *testing.T, now func() time.Time) store.CheckpointStore {
//			return newStore(t, now)
//		})
//	}
//
// Each suite runs its cases as subtests and calls the constructor once per subtest. The
// constructor must register its own cleanup (t.Cleanup). The suites need no network and no
// sleeping: time-dependent behaviour (the expiry of checkpoints and dead letters) is driven by a
// clock the suite passes to the constructor (the store's notion of now). Every case bounds its context, so a store that hangs fails the case instead
// of the whole test binary.
//
// Times in the records the suites write are truncated to milliseconds (the precision of a BSON
// date) and compared with time.Equal, so stores may return them in any location.
package storetest
