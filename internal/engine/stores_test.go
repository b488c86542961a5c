package engine

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store/memstore"
	"github.com/watchtree/watchtree/store/mongostore"
)

// lazyClient is a client that never connects: store sets do no I/O.
func lazyClient(t *testing.T) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1/?replicaSet=rs0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// TestStoreSetDefaults: each nil store field is the MongoDB store of the set's database,
// whatever the others, but Snapshots, whose default goes with the default checkpoints; the
// runtime indexes the MongoDB store only when it keeps checkpoints, dead letters or gaps, and a
// set without a database has no MongoDB store.
func TestStoreSetDefaults(t *testing.T) {
	client := lazyClient(t)
	ms := memstore.New(memstore.Options{})
	leases := memstore.NewLeases(memstore.Options{})
	isMongo := func(v any) bool { _, ok := v.(*mongostore.Store); return ok }

	st, err := newStoreSet(client, Stores{}, storeKey{"shop", "_wt_dead_letters"})
	if err != nil {
		t.Fatal(err)
	}
	if !isMongo(st.checkpoints) || !isMongo(st.deadLetters) || !isMongo(st.gaps) || !isMongo(st.snapshots) || !isMongo(st.leases) || !st.indexed {
		t.Fatalf("no store set: %+v, want every store the indexed MongoDB one", st)
	}

	st, _ = newStoreSet(client, Stores{Checkpoints: ms, DeadLetters: ms, Gaps: ms}, storeKey{"shop", "_wt_dead_letters"})
	if st.snapshots != nil || !isMongo(st.leases) || st.indexed || st.checkpoints != ms {
		t.Fatalf("record stores set: %+v, want no snapshot store, the MongoDB leases, nothing to index", st)
	}

	st, _ = newStoreSet(client, Stores{DeadLetters: ms}, storeKey{"shop", "_wt_dead_letters"})
	if !isMongo(st.snapshots) || !isMongo(st.checkpoints) || st.deadLetters != ms || !st.indexed {
		t.Fatalf("dead letters set: %+v, want the MongoDB checkpoints and snapshots, indexed", st)
	}

	st, _ = newStoreSet(client, Stores{Checkpoints: ms, DeadLetters: ms, Gaps: ms, Snapshots: ms, Leases: leases},
		storeKey{"shop", "_wt_dead_letters"})
	if st.mongo != nil || st.indexed || st.snapshots != ms || st.leases != leases {
		t.Fatalf("every store set: %+v, want no MongoDB store", st)
	}

	st, _ = newStoreSet(client, Stores{Checkpoints: ms, DeadLetters: ms, Gaps: ms}, storeKey{"", "_wt_dead_letters"})
	if st.mongo != nil || st.leases != nil {
		t.Fatalf("no database: %+v, want no MongoDB store", st)
	}
	if err := newStoreSets(client, Stores{}, nil).createIndexes(context.Background(), st); err != nil {
		t.Fatalf("CreateIndexes of a set with nothing to index: %v", err)
	}
}

// TestStoresNeedDatabase names the first store field a stream leaves to the default store.
func TestStoresNeedDatabase(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	all := &Spec{Name: "s"}
	leader := &Spec{Name: "s", SingleLeader: true}
	for _, tc := range []struct {
		stores Stores
		spec   *Spec
		want   string
	}{
		{Stores{}, all, "Checkpoints"},
		{Stores{Checkpoints: ms}, all, "DeadLetters"},
		{Stores{Checkpoints: ms, DeadLetters: ms}, all, "Gaps"},
		{Stores{Checkpoints: ms, DeadLetters: ms, Gaps: ms}, all, ""},
		{Stores{Checkpoints: ms, DeadLetters: ms, Gaps: ms}, leader, "Leases"},
		{Stores{Checkpoints: ms, DeadLetters: ms, Gaps: ms, Leases: memstore.NewLeases(memstore.Options{})}, leader, ""},
	} {
		if got := tc.stores.needsDatabase(tc.spec); got != tc.want {
			t.Errorf("%+v, single leader %v: %q, want %q", tc.stores, tc.spec.SingleLeader, got, tc.want)
		}
	}
}
