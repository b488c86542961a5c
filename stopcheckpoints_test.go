package watchtree

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// gatedSaves is a memstore whose Saves, once gated, hold until the gate opens; it counts the
// Saves inside it.
type gatedSaves struct {
	*memstore.Store
	gated atomic.Bool
	gate  chan struct{}

	mu           sync.Mutex
	inside, most int
}

func (g *gatedSaves) Save(ctx context.Context, cp store.Checkpoint) error {
	if g.gated.Load() {
		g.mu.Lock()
		g.inside++
		g.most = max(g.most, g.inside)
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inside--
			g.mu.Unlock()
		}()
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Save(ctx, cp)
}

func (g *gatedSaves) counts() (inside, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.most
}

// TestRuntimeStopBoundsCheckpointWrites: Stop writes the final checkpoints of many streams, and
// at most engine.CheckpointWrites of them at once (before the bound, all of them: the pool's cap
// with 10,000 streams); every stream's final checkpoint is still written.
func TestRuntimeStopBoundsCheckpointWrites(t *testing.T) {
	e := newRTEnv(t)
	ms := memstore.New(memstore.Options{})
	cps := &gatedSaves{Store: memstore.New(memstore.Options{}), gate: make(chan struct{})}
	rt, _ := e.newRuntime(t, func(c *Config) {
		c.Database = ""
		c.Checkpoints, c.DeadLetters, c.Gaps, c.Snapshots = cps, ms, ms, ms
		c.Leases = memstore.NewLeases(memstore.Options{})
	})
	const streams = 3 * engine.CheckpointWrites
	var handled atomic.Int64
	hs := make([]*Handle, streams)
	for i := range hs {
		h, err := rt.Spawn(testCtx(t), Stream[order]{
			Name: fmt.Sprintf("cp%02d", i), Database: e.db, Collection: "orders",
			// No write before Stop: each stream's final checkpoint is Stop's.
			Checkpoint: CheckpointPolicy{SaveEvery: 1 << 20, SaveInterval: time.Hour},
			OnInsert: func(context.Context, *Event[order]) error {
				handled.Add(1)
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	for _, h := range hs {
		waitState(t, h, StateRunning)
	}
	if _, err := e.coll("orders").InsertOne(testCtx(t), order{ID: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every stream's event", func() bool { return handled.Load() == streams })

	before := make([]string, streams) // the checkpoints written at Spawn: Stop's must differ
	for i := range streams {
		cp, _, err := cps.Load(testCtx(t), store.Scope{Stream: fmt.Sprintf("cp%02d", i), Instance: rt.InstanceName()})
		if err != nil {
			t.Fatal(err)
		}
		before[i] = string(cp.Token)
	}
	cps.gated.Store(true)
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Stop(testCtx(t)) }()
	waitFor(t, "the final checkpoint writes to reach the bound", func() bool {
		inside, _ := cps.counts()
		return inside >= engine.CheckpointWrites
	})
	close(cps.gate)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, most := cps.counts(); most > engine.CheckpointWrites {
		t.Fatalf("%d checkpoint writes at once, want at most %d", most, engine.CheckpointWrites)
	}
	for i := range streams {
		cp, ok, err := cps.Load(testCtx(t), store.Scope{Stream: fmt.Sprintf("cp%02d", i), Instance: rt.InstanceName()})
		if err != nil || !ok || len(cp.Token) == 0 || string(cp.Token) == before[i] {
			t.Fatalf("stream cp%02d's final checkpoint: %+v, %v, %v", i, cp, ok, err)
		}
	}
}
