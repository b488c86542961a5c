package integration_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// Shared cursors (Stream.Cursor Shared): members of one hub get exactly their collection's
// events, joins keep Spawn's promise, restarts catch up and attach again, and many streams stay
// within a small connection budget.

// hubComment is the comment of the shared cursors of database db.
func hubComment(db string) string { return "watchtree:hub:" + db }

// sharedOrders is a Shared Collection stream of Orders recording into got.
func sharedOrders(name, coll string, got *handled) watchtree.Stream[Order] {
	return watchtree.Stream[Order]{Name: name, Collection: coll, Cursor: watchtree.Shared, Restart: fastRestart,
		OnChange: got.handler()}
}

// exactly checks that got holds each of the documents from..to of its collection exactly once.
func exactly(t *testing.T, name string, got *handled, from, to int64) {
	t.Helper()
	docs := got.docs()
	for id := from; id <= to; id++ {
		if !docs[id] {
			t.Errorf("%s: document %d never delivered", name, id)
		}
	}
	if n := int64(len(docs)); n != to-from+1 {
		t.Errorf("%s: %d distinct documents delivered, want %d (another collection's events?)", name, n, to-from+1)
	}
	if d, n := got.deliveries(), got.distinct(); d != n {
		t.Errorf("%s: %d deliveries of %d distinct events: duplicates", name, d, n)
	}
}

// TestSharedMembersGetTheirCollectionOnly: two Shared members on two collections of one
// database, a third collection written beside them; while writes flow to all three, each
// member gets exactly its collection's events, none twice, none lost, and one hub cursor serves
// both.
func TestSharedMembersGetTheirCollectionOnly(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	a, b := newHandled(), newHandled()
	r.spawn(t, sharedOrders("a", "ca", a))
	r.spawn(t, sharedOrders("b", "cb", b))
	const n = 300
	var wg sync.WaitGroup
	for _, coll := range []string{"ca", "cb", "other"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.insertOrders(coll, 1, n)
		}()
	}
	wg.Wait()
	waitFor(t, "both members got their collection", func() bool { return a.distinct() >= n && b.distinct() >= n },
		func() string { return fmt.Sprintf("a %d, b %d", a.distinct(), b.distinct()) })
	// Whatever else arrives late arrives now: one more write each, then the counts.
	e.insertOrders("ca", n+1, n+1)
	e.insertOrders("cb", n+1, n+1)
	waitFor(t, "the last writes", func() bool { return a.docs()[n+1] && b.docs()[n+1] })
	exactly(t, "a", a, 1, n+1)
	exactly(t, "b", b, 1, n+1)
	if got := r.cmds.aggregates(hubComment(e.dbName)); got < 1 {
		t.Errorf("no shared cursor was opened (aggregates with comment %q: %d)", hubComment(e.dbName), got)
	}
}

// TestSharedJoinKeepsSpawnPromise: a member joins a hub that runs (another member, writes
// flowing): every write committed after its Spawn returns is delivered, the first one right
// after Spawn, before the member could attach.
func TestSharedJoinKeepsSpawnPromise(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	a := newHandled()
	r.spawn(t, sharedOrders("a", "ca", a))
	stop := make(chan struct{})
	var wrote atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the running member's load
		defer wg.Done()
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e.insertOrders("ca", i, i)
			wrote.Store(i)
		}
	}()
	waitFor(t, "the first member's events", func() bool { return a.distinct() > 20 })
	for round := range 5 {
		coll := fmt.Sprintf("join%d", round)
		got := newHandled()
		r.spawn(t, sharedOrders("join-"+coll, coll, got))
		e.insertOrders(coll, 1, 50) // committed after Spawn returned
		waitFor(t, coll+": every write after Spawn", func() bool { return got.distinct() >= 50 },
			func() string { return fmt.Sprintf("%d of 50", got.distinct()) })
		exactly(t, coll, got, 1, 50)
	}
	close(stop)
	wg.Wait()
	last := wrote.Load()
	waitFor(t, "the first member's every write", func() bool { return int64(a.distinct()) >= last })
	exactly(t, "a", a, 1, last)
}

// TestSharedRestartCatchesUpThenAttaches: a member restarted (Handle.Restart), and a member
// whose cursors a fail point kills, while writes flow: each resumes from its own position,
// catches up and attaches again, without losing an event. The other member is not disturbed.
func TestSharedRestartCatchesUpThenAttaches(t *testing.T) {
	e := newEnv(t)
	e.needSim("failCommand")
	r := e.startRuntime(nil)
	a, b := newHandled(), newHandled()
	ha := r.spawn(t, sharedOrders("a", "ca", a))
	r.spawn(t, sharedOrders("b", "cb", b))
	const n = 400
	var wg sync.WaitGroup
	for _, coll := range []string{"ca", "cb"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.insertOrders(coll, 1, n)
		}()
	}
	waitFor(t, "a under way", func() bool { return a.distinct() > 50 })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := ha.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	waitFor(t, "b under way", func() bool { return b.distinct() > 100 })
	// The next three getMores of the runtime's client fail with an error the driver does not
	// resume and no restart policy calls terminal: a hub that meets one resets (its members
	// detach and catch up alone), a catch-up cursor that meets one restarts its stream; either
	// way each member catches up, then attaches again.
	e.failPoint(bson.D{{Key: "times", Value: 3}}, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: r.app}})
	wg.Wait()
	waitFor(t, "both members got every write", func() bool { return a.distinct() >= n && b.distinct() >= n },
		func() string { return fmt.Sprintf("a %d, b %d", a.distinct(), b.distinct()) })
	e.failPointOff()
	e.insertOrders("ca", n+1, n+1)
	waitFor(t, "a attached again", func() bool { return a.docs()[n+1] })
	if miss := n + 1 - int64(len(a.docs())); miss != 0 {
		t.Errorf("a: %d documents lost", miss)
	}
	if miss := n - int64(len(b.docs())); miss != 0 {
		t.Errorf("b: %d documents lost", miss)
	}
}

// TestSharedPipelineTypoFailsThatMemberAlone: a Shared member whose $match the server refuses
// fails its Spawn, terminally; the member beside it (no pipeline) runs on. A pipeline with a
// stage other than $match keeps a dedicated cursor and works.
func TestSharedPipelineTypoFailsThatMemberAlone(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	good := newHandled()
	r.spawn(t, sharedOrders("good", "ca", good))
	bad := sharedOrders("typo", "cb", newHandled())
	bad.Pipeline = mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$nosuchoperator", Value: 1}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := r.rt.Spawn(ctx, bad)
	if err == nil {
		t.Fatal("Spawn with a refused $match succeeded, want an error")
	}
	t.Logf("Spawn with a refused $match: %v", err)
	own := newHandled()
	proj := sharedOrders("projected", "cc", own)
	proj.Pipeline = mongo.Pipeline{{{Key: "$addFields", Value: bson.D{{Key: "extra", Value: 1}}}}}
	hp := r.spawn(t, proj)
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitLimit)
	defer cancel2()
	if st, err := hp.Status(ctx2); err != nil || len(st.Warnings) == 0 || !strings.Contains(st.Warnings[len(st.Warnings)-1], "dedicated cursor") {
		t.Errorf("Status of a Shared stream with its own $addFields: %v, warnings %q, want one saying it reads on a dedicated cursor", err, st.Warnings)
	}
	e.insertOrders("ca", 1, 20)
	e.insertOrders("cc", 1, 20)
	waitFor(t, "the good member and the dedicated one run on", func() bool { return good.distinct() >= 20 && own.distinct() >= 20 })
	exactly(t, "good", good, 1, 20)
	exactly(t, "projected", own, 1, 20)
}

// connCounter follows the driver's pool events: the connections open now and at most.
type connCounter struct {
	open, peak atomic.Int64
}

func (c *connCounter) monitor() *event.PoolMonitor {
	return &event.PoolMonitor{Event: func(ev *event.PoolEvent) {
		switch ev.Type {
		case event.ConnectionCreated:
			n := c.open.Add(1)
			for {
				p := c.peak.Load()
				if n <= p || c.peak.CompareAndSwap(p, n) {
					break
				}
			}
		case event.ConnectionClosed:
			c.open.Add(-1)
		}
	}}
}

// TestSharedManyStreamsFewConnections: 1,000 Shared streams over 100 collections on a default
// client (maxPoolSize 100): every one running, each gets its collection's insert within 60 s,
// the client never holds more than 20 connections, and the hub reopens a handful of times.
//
// WATCHTREE_TEST_SHARED_STREAMS sets the number of streams (a tenth as many collections);
// WATCHTREE_TEST_SHARED_PARALLEL sets how many Spawns run at a time (default 20).
func TestSharedManyStreamsFewConnections(t *testing.T) {
	streams := 1000
	if n, err := strconv.Atoi(os.Getenv("WATCHTREE_TEST_SHARED_STREAMS")); err == nil && n >= 10 {
		streams = n
	}
	colls := streams / 10
	e := newEnv(t)
	conns := &connCounter{}
	cmds := &cmdCounter{}
	cl, err := mongo.Connect(options.Client().ApplyURI(e.uri).SetPoolMonitor(conns.monitor()).SetMonitor(cmds.monitor()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	r := e.startRuntime(func(c *watchtree.Config) { c.Client = cl })
	gots := make([]*handled, streams)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	parallel := 20 // Spawns at a time; WATCHTREE_TEST_SHARED_PARALLEL=1 spawns one after another
	if n, err := strconv.Atoi(os.Getenv("WATCHTREE_TEST_SHARED_PARALLEL")); err == nil && n >= 1 {
		parallel = n
	}
	sem := make(chan struct{}, parallel)
	for i := range streams {
		gots[i] = newHandled()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if _, err := r.rt.Spawn(ctx, sharedOrders(fmt.Sprintf("s%03d", i), fmt.Sprintf("c%02d", i%colls), gots[i])); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Spawn: %v", err)
	}
	spawned := time.Since(start)
	for c := range colls {
		e.insertOrders(fmt.Sprintf("c%02d", c), 1, 1)
	}
	waitWithin(t, 2*waitLimit, "every stream got its collection's insert", func() bool {
		for _, g := range gots {
			if g.distinct() < 1 {
				return false
			}
		}
		return true
	}, func() string {
		n := 0
		for _, g := range gots {
			if g.distinct() >= 1 {
				n++
			}
		}
		return fmt.Sprintf("%d of %d", n, streams)
	})
	for i, g := range gots {
		if g.deliveries() != 1 {
			t.Errorf("stream %d: %d deliveries, want 1", i, g.deliveries())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	sts, err := r.rt.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, st := range sts {
		if st.State == watchtree.StateRunning {
			running++
		}
	}
	if running != streams {
		t.Errorf("%d of %d streams running", running, streams)
	}
	reopens := cmds.aggregates(hubComment(e.dbName))
	t.Logf("%d streams over %d collections: spawned in %v, %d hub cursor opens, connections at most %d (%d open now)",
		streams, colls, spawned.Round(time.Millisecond), reopens, conns.peak.Load(), conns.open.Load())
	if p := conns.peak.Load(); p > 20 {
		t.Errorf("the client held up to %d connections, want at most 20", p)
	}
	if reopens > 10 {
		t.Errorf("the hub opened its cursor %d times for %d Spawns, want a handful", reopens, streams)
	}
}

// TestSharedCursorChangesReported: a member reports each move to or off the shared cursor
// (observe.CursorChanged) and its Status says where it reads. It attaches once level; the
// hub's getMore failing detaches it, with the failure as the reason, and it attaches again
// after catching up, with nothing lost.
func TestSharedCursorChangesReported(t *testing.T) {
	e := newEnv(t)
	e.needSim("failCommand")
	r := e.startRuntime(nil)
	a := newHandled()
	h := r.spawn(t, sharedOrders("a", "ca", a))
	changes := func(attached bool) []observe.Event {
		return r.obs.find(func(ev observe.Event) bool {
			c, ok := ev.(observe.CursorChanged)
			return ok && c.Stream == "a" && c.Attached == attached
		})
	}
	r.obs.wait(t, "CursorChanged attached", func(ev observe.Event) bool {
		c, ok := ev.(observe.CursorChanged)
		return ok && c.Stream == "a" && c.Attached
	})
	waitFor(t, "Status.Cursor shared (attached)", func() bool { return status(t, h).Cursor == "shared (attached)" })
	e.insertOrders("ca", 1, 20)
	waitFor(t, "the first writes", func() bool { return a.distinct() >= 20 })

	// The hub's next getMore fails with an error the driver does not resume: it resets, and its
	// member detaches.
	e.failPoint(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"getMore"}},
		{Key: "errorCode", Value: 6}, {Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: r.app}})
	ev := r.obs.wait(t, "CursorChanged detached", func(ev observe.Event) bool {
		c, ok := ev.(observe.CursorChanged)
		return ok && c.Stream == "a" && !c.Attached
	}).(observe.CursorChanged)
	if !strings.Contains(ev.Why, "shared cursor failed") {
		t.Errorf("detached because %q, want the shared cursor's failure", ev.Why)
	}
	e.insertOrders("ca", 21, 40)
	waitFor(t, "attached again", func() bool { return len(changes(true)) >= 2 },
		func() string { return r.obs.dump() })
	waitFor(t, "every write", func() bool { return a.distinct() >= 40 })
	exactly(t, "a", a, 1, 40)
	waitFor(t, "Status.Cursor shared (attached) again", func() bool { return status(t, h).Cursor == "shared (attached)" })
}

// status reads h's Status, failing the test on error.
func status(t *testing.T, h *watchtree.Handle) watchtree.StreamStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := h.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st
}
