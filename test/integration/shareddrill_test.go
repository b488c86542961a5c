package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// The 50-member SIGKILL drill (issue 38): the worker mode "shared50" runs drillMembers Shared
// Collection streams m00..m49 over drillColls collections c0..c9 (member i reads c<i%10>, so
// five members per collection). The parent writes a keyed load: drillKeys documents per
// collection (the keys), each inserted with seq (Order.V) 0 and then replaced with seq 1, 2, ...
// so that a handler sees a key's seqs in the order they were written. Key k of collection c is
// the document c*1000+k: a member handed another collection's event would show it.
const (
	drillMembers = 50
	drillColls   = 10
	drillKeys    = 20
	drillSeqs1   = 4 // seqs 0..3, written while worker 1 runs (it is killed meanwhile)
	drillSeqs2   = 2 // seqs 4..5, written while no worker runs
)

// drillMember is the name of member i and its collection.
func drillMember(i int) (name, coll string) {
	return fmt.Sprintf("m%02d", i), fmt.Sprintf("c%d", i%drillColls)
}

// shared50WorkerMain runs one runtime with the drill's 50 Shared members. Each handler records
// every delivery in <db>.deliveries as {stream, event, doc, seq, run, n, w}: n counts the
// member's deliveries in this run (the handling order of one key's events, which one lane
// handles one after another), w is "<stream>/<doc>/<seq>". Once every member has started it
// writes {_id: run} to <db>.workers. SIGTERM stops it gracefully; SIGKILL ends it anywhere.
func shared50WorkerMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "shared50 worker: "+format+"\n", args...)
		return 2
	}
	ctx, cl, db, run, done, err := workerSetup("wt-it-shared50")
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	var mu sync.Mutex
	started := map[string]bool{}
	allStarted := make(chan struct{})
	obs := observe.Func(func(ev observe.Event) {
		if _, ok := ev.(observe.Started); ok {
			mu.Lock()
			defer mu.Unlock()
			if n := len(started); !started[ev.EventMeta().Stream] {
				started[ev.EventMeta().Stream] = true
				if n+1 == drillMembers {
					close(allStarted)
				}
			}
		}
	})
	rt, err := watchtree.New(watchtree.Config{Client: cl, Database: db, Observer: obs})
	if err != nil {
		return fail("New: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := rt.Start(sctx); err != nil {
		return fail("Start: %v", err)
	}
	deliveries := cl.Database(db).Collection("deliveries")
	var wg sync.WaitGroup
	errs := make(chan error, drillMembers)
	sem := make(chan struct{}, 10)
	for i := range drillMembers {
		name, coll := drillMember(i)
		var n atomic.Int64
		spec := watchtree.Stream[Order]{Name: name, Collection: coll, Cursor: watchtree.Shared, Lanes: 2, Restart: fastRestart,
			Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 10, SaveInterval: 100 * time.Millisecond},
			OnChange: func(ctx context.Context, ev *watchtree.Event[Order]) error {
				doc, _ := ev.DocumentID().AsInt64OK()
				seq := -1
				if ev.FullDocument != nil {
					seq = ev.FullDocument.V
				}
				_, err := deliveries.InsertOne(ctx, bson.D{{Key: "stream", Value: name}, {Key: "event", Value: ev.ID()},
					{Key: "doc", Value: doc}, {Key: "seq", Value: seq}, {Key: "run", Value: run}, {Key: "n", Value: n.Add(1)},
					{Key: "w", Value: fmt.Sprintf("%s/%d/%d", name, doc, seq)}})
				return err
			}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := rt.Spawn(sctx, spec); err != nil {
				errs <- fmt.Errorf("Spawn(%s): %w", name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fail("%v", err)
	}
	select {
	case <-allStarted:
	case <-sctx.Done():
		mu.Lock()
		n := len(started)
		mu.Unlock()
		return fail("%d of %d members started: %v", n, drillMembers, sctx.Err())
	}
	if _, err := cl.Database(db).Collection("workers").InsertOne(sctx, bson.D{{Key: "_id", Value: run}}); err != nil {
		return fail("ready: %v", err)
	}
	<-ctx.Done() // SIGTERM
	stopCtx, cancelStop := context.WithTimeout(context.Background(), waitLimit)
	defer cancelStop()
	if err := rt.Stop(stopCtx); err != nil {
		return fail("Stop: %v", err)
	}
	return 0
}

// writeDrillSeqs writes seqs from..to of every key of every collection, a seq of all keys before
// the next; the collections are written concurrently. Seq 0 inserts the key, the others replace
// it (a replace event carries the document as written, so the handler reads the seq of that
// write).
func (e *env) writeDrillSeqs(from, to int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, drillColls)
	for c := range drillColls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			coll := e.db.Collection(fmt.Sprintf("c%d", c))
			for seq := from; seq <= to; seq++ {
				for k := 1; k <= drillKeys; k++ {
					doc := Order{ID: int64(c*1000 + k), V: seq, Key: fmt.Sprintf("k%d", k)}
					var err error
					if seq == 0 {
						_, err = coll.InsertOne(ctx, doc)
					} else {
						_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: doc.ID}}, doc)
					}
					if err != nil {
						errs <- fmt.Errorf("c%d key %d seq %d: %w", c, k, seq, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(func() []error {
		var out []error
		for err := range errs {
			out = append(out, err)
		}
		return out
	}()...)
}

// TestSharedSIGKILLDrill50: 50 Shared members over 10 collections in a worker process, SIGKILLed
// while a keyed load is being written and handled; more is written while no worker runs, and a
// new worker resumes every member. For every member: every (key, seq) written is handled at least
// once (zero loss), only its own collection's; within a run a key's seqs are handled in
// increasing order and no event twice; the replays of run 2 are a suffix of what run 1 handled.
func TestSharedSIGKILLDrill50(t *testing.T) {
	e := newEnv(t)
	began := time.Now()
	w1 := startWorkerMode(t, e, 1, "shared50")
	t.Logf("worker 1: 50 members started in %v", time.Since(began).Round(time.Millisecond))

	wrote := make(chan error, 1)
	go func() { wrote <- e.writeDrillSeqs(0, drillSeqs1-1) }()
	phase1 := int64(drillMembers * drillKeys * drillSeqs1) // the deliveries of the first writes
	waitFor(t, "worker 1 mid-stream", func() bool { return e.collCount("deliveries", nil) >= phase1/4 },
		w1.stderr.String)
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = w1.wait(t) // killed: the exit status is the signal
	atKill := e.collCount("deliveries", nil)
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	t.Logf("killed worker 1 after %d of the first writes' %d deliveries", atKill, phase1)
	if atKill >= phase1 {
		t.Logf("worker 1 had handled everything before the kill; the drill still checks resume")
	}
	if err := e.writeDrillSeqs(drillSeqs1, drillSeqs1+drillSeqs2-1); err != nil {
		t.Fatalf("write: %v", err)
	}

	resumed := time.Now()
	w2 := startWorkerMode(t, e, 2, "shared50")
	want := drillMembers * drillKeys * (drillSeqs1 + drillSeqs2) // distinct (member, key, seq)
	lastCount, lastDistinct := int64(-1), 0
	distinctWrites := func() int {
		// Distinct reads every delivery: only when there are enough and more came.
		if n := e.collCount("deliveries", nil); n >= int64(want) && n != lastCount {
			lastCount = n
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			var ws []string
			if err := e.db.Collection("deliveries").Distinct(ctx, "w", bson.D{}).Decode(&ws); err != nil {
				t.Fatalf("distinct: %v", err)
			}
			lastDistinct = len(ws)
		}
		return lastDistinct
	}
	// Worker 2 handles some 5,000 deliveries, each an insert: under a loaded machine that takes
	// longer than one waitLimit (unloaded, about 5 s).
	waitWithin(t, 2*waitLimit, "every member handled every write", func() bool { return distinctWrites() >= want },
		func() string {
			return fmt.Sprintf("%d of %d (member, key, seq) handled\nworker 2 stderr:\n%s", lastDistinct, want, w2.stderr.String())
		})
	caughtUp := time.Since(resumed)
	w2.terminate(t)

	type delivery struct {
		Stream string `bson:"stream"`
		Event  string `bson:"event"`
		Doc    int64  `bson:"doc"`
		Seq    int    `bson:"seq"`
		Run    int    `bson:"run"`
		N      int64  `bson:"n"`
	}
	all := deliveries[delivery](e)
	byMember := map[string][]delivery{}
	for _, d := range all {
		byMember[d.Stream] = append(byMember[d.Stream], d)
	}
	totalReplays, minReplays, maxReplays := 0, -1, 0
	for i := range drillMembers {
		name, coll := drillMember(i)
		ds := byMember[name]
		sort.Slice(ds, func(a, b int) bool {
			if ds[a].Run != ds[b].Run {
				return ds[a].Run < ds[b].Run
			}
			return ds[a].N < ds[b].N
		})
		c := i % drillColls
		got := map[[2]int64]bool{}    // (doc, seq) handled
		last := map[[2]int64]int{}    // (run, doc) -> the last seq handled in that run
		perRun := map[string][2]int{} // event -> deliveries in run 1, run 2
		for _, d := range ds {
			if d.Doc/1000 != int64(c) {
				t.Errorf("%s (%s): handled document %d of another collection (event %s)", name, coll, d.Doc, d.Event)
				continue
			}
			if d.Run != 1 && d.Run != 2 {
				t.Errorf("%s: a delivery of run %d", name, d.Run)
				continue
			}
			got[[2]int64{d.Doc, int64(d.Seq)}] = true
			k := [2]int64{int64(d.Run), d.Doc}
			if prev, ok := last[k]; ok && d.Seq <= prev {
				t.Errorf("%s run %d: key %d handled seq %d after seq %d: per-key order broken", name, d.Run, d.Doc, d.Seq, prev)
			}
			last[k] = d.Seq
			r := perRun[d.Event]
			r[d.Run-1]++
			perRun[d.Event] = r
		}
		for k := 1; k <= drillKeys; k++ {
			for seq := range drillSeqs1 + drillSeqs2 {
				if doc := int64(c*1000 + k); !got[[2]int64{doc, int64(seq)}] {
					t.Errorf("%s (%s): key %d seq %d never handled", name, coll, doc, seq)
				}
			}
		}
		var replayed, notReplayed []string
		for ev, r := range perRun {
			if r[0] > 1 || r[1] > 1 {
				t.Errorf("%s: event %s handled %d times in run 1 and %d in run 2; never twice within a run", name, ev, r[0], r[1])
			}
			switch {
			case r[0] > 0 && r[1] > 0:
				replayed = append(replayed, ev)
			case r[0] > 0:
				notReplayed = append(notReplayed, ev)
			}
		}
		sort.Strings(replayed)
		sort.Strings(notReplayed)
		if len(replayed) > 0 && len(notReplayed) > 0 && notReplayed[len(notReplayed)-1] > replayed[0] {
			t.Errorf("%s: the replays are not a suffix of run 1: event %s was not replayed but %s, before it, was",
				name, notReplayed[len(notReplayed)-1], replayed[0])
		}
		totalReplays += len(replayed)
		maxReplays = max(maxReplays, len(replayed))
		if minReplays < 0 || len(replayed) < minReplays {
			minReplays = len(replayed)
		}
	}
	t.Logf("SIGKILL drill, %d members over %d collections: %d writes, %d deliveries (%d at the kill); replays after the kill: %d in all, %d to %d per member; worker 2 caught up in %v, %v in all",
		drillMembers, drillColls, drillColls*drillKeys*(drillSeqs1+drillSeqs2), len(all), atKill, totalReplays, minReplays, maxReplays,
		caughtUp.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}
