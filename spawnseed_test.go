package watchtree

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// staleFirstLoad is a checkpoint store whose first Load answers "none", as a read made just
// before another instance's seed landed would.
type staleFirstLoad struct {
	*memstore.Store
	loads atomic.Int64
}

func (s *staleFirstLoad) Load(ctx context.Context, scope store.Scope) (store.Checkpoint, bool, error) {
	if s.loads.Add(1) == 1 {
		return store.Checkpoint{}, false, nil
	}
	return s.Store.Load(ctx, scope)
}

// TestSpawnSeedAfterAnotherInstancesLaterSeed: two instances spawning a new SingleLeader stream
// at once each capture a position, find no checkpoint, and save theirs; the later capture's
// save can land first, and the earlier one, refused as backward, is still the one to keep
// (everything written after either Spawn returned lies after it). Spawn reads the checkpoint
// again and saves its seed as a Rewind over the other's; it failed with "save its start
// position: ... behind the stored token" before (make bench's BenchmarkLeaderBalance30, three
// nodes spawning 30 streams at once).
func TestSpawnSeedAfterAnotherInstancesLaterSeed(t *testing.T) {
	e := newRTEnv(t)
	ms := memstore.New(memstore.Options{})
	cps := &staleFirstLoad{Store: ms}
	// The other instance's seed: captured later than this one's will be (its cluster time and
	// token sort after anything the server hands out now).
	tok, err := bson.Marshal(bson.D{{Key: "_data", Value: "FF"}})
	if err != nil {
		t.Fatal(err)
	}
	later := store.Checkpoint{Stream: "billing", Token: tok,
		ClusterTime: bson.Timestamp{T: uint32(time.Now().Add(time.Hour).Unix())}, Source: store.SourceInitial,
		Owner: "other", UpdatedAt: time.Now()}
	if err := ms.Save(testCtx(t), later); err != nil {
		t.Fatal(err)
	}
	rt, _ := e.newRuntime(t, func(c *Config) {
		c.Checkpoints, c.DeadLetters, c.Gaps, c.Snapshots = cps, ms, ms, ms
		c.Leases = memstore.NewLeases(memstore.Options{})
	})
	_, err = rt.Spawn(testCtx(t), Stream[bson.Raw]{Name: "billing", Collection: "billing", Mode: SingleLeader,
		OnChange: func(context.Context, *Event[bson.Raw]) error { return nil }})
	if err != nil {
		t.Fatalf("Spawn beside another instance's later seed: %v", err)
	}
	cp, ok, err := ms.Load(testCtx(t), store.Scope{Stream: "billing"})
	if err != nil || !ok {
		t.Fatalf("checkpoint after Spawn: %v, found %v", err, ok)
	}
	if cp.Owner != rt.cfg.InstanceID || !cp.ClusterTime.Before(later.ClusterTime) {
		t.Fatalf("checkpoint after Spawn: owner %q at %v; want this instance's earlier seed (the other's is at %v)",
			cp.Owner, cp.ClusterTime, later.ClusterTime)
	}
}
