package watchtree

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// TestRuntimeOnMemstore: a runtime whose stores are all memstores, as in a user's own tests.
// The stream watches through Config.Client, and its checkpoint and dead letters land in the
// memstore (DeadLetters and Replay read them there); nothing is written to MongoDB.
func TestRuntimeOnMemstore(t *testing.T) {
	e := newRTEnv(t)
	ms := memstore.New(memstore.Options{})
	rt, rec := e.newRuntime(t, func(c *Config) {
		c.Database = "" // the stream names its database; the stores need none
		c.Checkpoints, c.DeadLetters, c.Gaps, c.Snapshots = ms, ms, ms, ms
		c.Leases = memstore.NewLeases(memstore.Options{})
	})
	fixed := make(chan struct{})
	s := newSeen()
	spec := Stream[order]{
		Name:       "mem",
		Database:   e.db,
		Collection: "orders",
		Retry:      RetryPolicy{MaxAttempts: 1},
		Checkpoint: CheckpointPolicy{SaveEvery: 1, SaveInterval: 10 * time.Millisecond},
		OnInsert: func(_ context.Context, ev *Event[order]) error {
			if ev.FullDocument.Poison {
				select {
				case <-fixed:
				default:
					return errors.New("poison order")
				}
			}
			s.add(ev, "insert")
			return nil
		},
	}
	h, err := rt.Spawn(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, StateRunning)
	ctx := testCtx(t)
	if _, err := e.coll("orders").InsertMany(ctx, []any{order{ID: 1}, order{ID: 2, Poison: true}, order{ID: 3}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the healthy events", func() bool { return s.distinct() == 2 })
	waitFor(t, "a DeadLettered event", func() bool { return rec.count(isEvent[observe.DeadLettered]) == 1 })

	stored, err := ms.ListDeadLetters(ctx, store.Scope{Stream: "mem", Instance: rt.InstanceName()}, 0)
	if err != nil || len(stored) != 1 || !strings.Contains(stored[0].Error, "poison order") {
		t.Fatalf("memstore dead letters: %+v, %v; want the poison order's", stored, err)
	}
	dls, err := rt.DeadLetters(ctx, "mem", 0)
	if err != nil || len(dls) != 1 || dls[0].ID != stored[0].ID {
		t.Fatalf("rt.DeadLetters: %+v, %v; want the memstore's record", dls, err)
	}
	close(fixed)
	if err := rt.Replay(ctx, "mem", dls[0].ID); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if left, _ := ms.ListDeadLetters(ctx, store.Scope{Stream: "mem", Instance: rt.InstanceName()}, 0); len(left) != 0 {
		t.Fatalf("the replayed dead letter is still in the memstore: %+v", left)
	}
	waitFor(t, "a checkpoint in the memstore", func() bool {
		cp, ok, err := ms.Load(ctx, store.Scope{Stream: "mem", Instance: rt.InstanceName()})
		return err == nil && ok && len(cp.Token) > 0
	})
	cps, err := rt.Checkpoints(ctx, "mem")
	if err != nil || len(cps) != 1 || cps[0].Instance != rt.InstanceName() || len(cps[0].Token) == 0 || cps[0].Age < 0 {
		t.Fatalf("rt.Checkpoints: %+v, %v; want this instance's checkpoint", cps, err)
	}
	if _, err := rt.Checkpoints(ctx, "nope"); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("rt.Checkpoints of an unknown stream: %v, want ErrUnknownStream", err)
	}

	names, err := e.client.Database(e.db).ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "_wt_") {
			t.Errorf("collection %s was created although every store is the memstore", n)
		}
	}
}

// TestRuntimeStoreConfigRules: the store fields are checked without a server, by New and
// Spawn: Client stays required with stores set, a stream's dead-letter collection cannot be
// named when Config.DeadLetters serves it, and a cluster-wide stream needs no database when no
// store is MongoDB's.
func TestRuntimeStoreConfigRules(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	_, err := New(Config{Checkpoints: ms, DeadLetters: ms, Gaps: ms})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.Client" || !strings.Contains(ce.Rule, "even when stores are set") {
		t.Fatalf("New with stores and no Client: %v, want a ConfigError on Config.Client", err)
	}

	e := newRTEnv(t)
	noop := func(context.Context, *Event[order]) error { return nil }
	onlyDL, _ := e.newRuntime(t, func(c *Config) { c.DeadLetters = ms })
	_, err = onlyDL.Spawn(testCtx(t), Stream[order]{Name: "dl", Collection: "c", DeadLetter: DeadLetterPolicy{Collection: "my_dead"}, OnChange: noop})
	if !errors.As(err, &ce) || ce.Field != "DeadLetter.Collection" || !strings.Contains(ce.Rule, `got "my_dead"`) ||
		!errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Spawn naming a dead-letter collection with Config.DeadLetters set: %v", err)
	}

	own, _ := e.newRuntime(t, func(c *Config) {
		c.Database = ""
		c.Checkpoints, c.DeadLetters, c.Gaps = ms, ms, ms
	})
	if _, err := Props(own, Stream[order]{Name: "cluster", OnChange: noop}); err != nil {
		t.Fatalf("a cluster-wide stream without a database, every store it uses set: %v", err)
	}
	// The default lease store needs a database: a SingleLeader cluster-wide stream names it.
	_, err = Props(own, Stream[order]{Name: "cluster-leader", Mode: SingleLeader, OnChange: noop})
	if !errors.As(err, &ce) || ce.Field != "Database" || !strings.Contains(ce.Rule, "Config.Leases is nil") {
		t.Fatalf("a SingleLeader cluster-wide stream without a database or Config.Leases: %v", err)
	}
	// The snapshot records go with the checkpoints: with Checkpoints set, a stream that
	// snapshots needs Config.Snapshots, for either way of snapshotting.
	for _, spec := range []Stream[order]{
		{Name: "snap", Database: e.db, Collection: "c", Snapshot: SnapshotPolicy{Mode: SnapshotInitial}, OnChange: noop},
		{Name: "rebuild", Database: e.db, Collection: "c", OnHistoryLost: RebuildFromSnapshot, OnChange: noop},
	} {
		_, err = Props(own, spec)
		if !errors.As(err, &ce) || ce.Field != "Config.Snapshots" || ce.Stream != spec.Name || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("stream %s snapshotting with Config.Checkpoints set and no Config.Snapshots: %v", spec.Name, err)
		}
	}
	// An Ephemeral stream keeps its snapshot progress in memory: it needs no snapshot store.
	if _, err := Props(own, Stream[order]{Name: "snap-ephemeral", Database: e.db, Collection: "c",
		Snapshot: SnapshotPolicy{Mode: SnapshotInitial}, Checkpoint: CheckpointPolicy{Ephemeral: true}, OnChange: noop}); err != nil {
		t.Fatalf("an Ephemeral stream that snapshots, no Config.Snapshots: %v", err)
	}
	withSnapshots, _ := e.newRuntime(t, func(c *Config) {
		c.Checkpoints, c.DeadLetters, c.Gaps, c.Snapshots = ms, ms, ms, ms
	})
	if _, err := Props(withSnapshots, Stream[order]{Name: "snap", Collection: "c", Snapshot: SnapshotPolicy{Mode: SnapshotInitial}, OnChange: noop}); err != nil {
		t.Fatalf("a stream that snapshots, Config.Snapshots set: %v", err)
	}
}
