package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// incCounter is the drills' non-idempotent handler write: $inc of the document's counter by
// one, and an entry in the log collection (its own _id, so a duplicate is a second entry).
func incCounter(ctx context.Context, db *mongo.Database, doc int64, event string, run int) error {
	if _, err := db.Collection("counters").UpdateOne(ctx, bson.D{{Key: "_id", Value: doc}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		return err
	}
	_, err := db.Collection("log").InsertOne(ctx, bson.D{{Key: "event", Value: event}, {Key: "doc", Value: doc}, {Key: "run", Value: run}})
	return err
}

// counters returns the counter of every document.
func (e *env) counters() map[int64]int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cur, err := e.db.Collection("counters").Find(ctx, bson.D{})
	if err != nil {
		e.t.Fatalf("counters: %v", err)
	}
	var docs []struct {
		ID int64 `bson:"_id"`
		N  int   `bson:"n"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		e.t.Fatalf("counters: %v", err)
	}
	out := make(map[int64]int, len(docs))
	for _, d := range docs {
		out[d.ID] = d.N
	}
	return out
}

// logStats returns the log's entries and its duplicate events (entries beyond the first of an
// event ID).
func (e *env) logStats() (entries, dups int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cur, err := e.db.Collection("log").Find(ctx, bson.D{})
	if err != nil {
		e.t.Fatalf("log: %v", err)
	}
	var docs []struct {
		Event string `bson:"event"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		e.t.Fatalf("log: %v", err)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Event] {
			dups++
		}
		seen[d.Event] = true
	}
	return len(docs), dups
}

// TestTransactionalStream: a Transactional stream's handler $incs a counter per order. An
// attempt that fails after its writes leaves nothing behind (the retry's writes are the only
// ones); a poison order is dead-lettered with none of its writes; the checkpoint passes every
// event. A handler that writes through another client has its events dead-lettered at once,
// with an error naming the rule.
func TestTransactionalStream(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	db := r.client.Database(e.dbName)
	const orders, poison = 40, int64(13)
	var mu sync.Mutex
	attempts := map[int64]int{}
	var healed atomic.Bool
	h := r.spawn(t, watchtree.Stream[Order]{Name: "billing", Collection: "orders", Lanes: 3, Transactional: true,
		Retry:      watchtree.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 5, SaveInterval: 50 * time.Millisecond},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			id := ev.FullDocument.ID
			mu.Lock()
			attempts[id]++
			mu.Unlock()
			if err := incCounter(ctx, db, id, ev.ID(), 0); err != nil {
				return err
			}
			switch {
			case id == poison && !healed.Load():
				return watchtree.Permanent(errors.New("poison order"))
			case id%4 == 0 && ev.Attempt() == 1:
				return fmt.Errorf("order %d: failing its first attempt after its writes", id)
			}
			return nil
		}})
	r.waitRunning(t, h)
	e.insertOrders("orders", 1, orders)
	waitFor(t, "the poison order dead-lettered", func() bool { return len(r.obs.find(ofType[observe.DeadLettered])) == 1 }, r.obs.dump)
	waitFor(t, "every good order counted", func() bool { return len(e.counters()) == orders-1 }, r.obs.dump)
	for id, n := range e.counters() {
		if n != 1 {
			t.Errorf("order %d counted %d times, want 1", id, n)
		}
		if id == poison {
			t.Errorf("the poison order's writes committed")
		}
	}
	if n, dups := e.logStats(); n != orders-1 || dups != 0 {
		t.Errorf("log: %d entries, %d duplicates; want %d and 0", n, dups, orders-1)
	}
	mu.Lock()
	for id := int64(4); id <= orders; id += 4 {
		if attempts[id] != 2 {
			t.Errorf("order %d: %d attempts, want 2", id, attempts[id])
		}
	}
	mu.Unlock()
	if dls := r.deadLetters(t, "billing"); len(dls) != 1 || !strings.Contains(dls[0].Error, "poison order") {
		t.Errorf("dead letters %+v, want the poison order's", dls)
	}
	if n := e.collCount("_wt_applied", bson.D{}); n == 0 {
		t.Errorf("no applied records")
	}

	// The dead letter's replay applies it once: its applied record, written with the dead
	// letter, is claimed by the replay's transaction.
	healed.Store(true)
	dl := r.deadLetters(t, "billing")[0]
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.rt.Replay(ctx, "billing", dl.ID); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if n := e.counters()[poison]; n != 1 {
		t.Errorf("the replayed poison order counted %d times, want 1", n)
	}
	if n, dups := e.logStats(); n != orders || dups != 0 {
		t.Errorf("log after the replay: %d entries, %d duplicates; want %d and 0", n, dups, orders)
	}

	// Another client: the driver refuses the session, and the event is dead-lettered at once.
	other := e.client.Database(e.dbName)
	h2 := r.spawn(t, watchtree.Stream[Order]{Name: "wrongclient", Collection: "refunds", Transactional: true, Retry: quickRetry,
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			return incCounter(ctx, other, ev.FullDocument.ID+1000, ev.ID(), 0)
		}})
	r.waitRunning(t, h2)
	e.insertOrders("refunds", 1, 1)
	waitFor(t, "the refund dead-lettered", func() bool { return len(r.deadLetters(t, "wrongclient")) == 1 }, r.obs.dump)
	dl = r.deadLetters(t, "wrongclient")[0]
	if dl.Attempts != 1 || !strings.Contains(dl.Error, "other than Config.Client") {
		t.Errorf("dead letter after %d attempts, error %q; want 1 attempt and the rule", dl.Attempts, dl.Error)
	}
	if n := e.collCount("counters", bson.D{{Key: "_id", Value: int64(1001)}}); n != 0 {
		t.Errorf("the write through another client landed")
	}
}

// The transactional worker process: the test binary re-executed with envWorkerMode=txn.
const (
	envWorkerLanes  = "WATCHTREE_IT_WORKER_LANES"
	txnWorkerStream = "billing"
)

// txnWorkerMain runs one runtime (InstanceID "proc-<run>", the tests' short lease policy) with
// the SingleLeader Transactional stream "billing" on <db>.orders, with envWorkerLanes lanes. Its
// handler takes inserts and updates: incCounter of the order, tagged with the run. Its role is
// kept in <db>.roles as leaderWorkerMain keeps it; {_id: run} in <db>.workers says it has
// spawned the stream. SIGTERM stops it gracefully; SIGKILL ends it wherever it is.
func txnWorkerMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "txn worker: "+format+"\n", args...)
		return 2
	}
	ctx, cl, db, run, done, err := workerSetup("wt-it-txn-worker")
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	lanes, err := strconv.Atoi(os.Getenv(envWorkerLanes))
	if err != nil {
		return fail("%s: %v", envWorkerLanes, err)
	}
	obs := roleRecorder(cl.Database(db), run)
	cfg := watchtree.Config{Client: cl, Database: db, Observer: obs, InstanceID: fmt.Sprintf("proc-%d", run), Lease: testLease}
	if os.Getenv(envLog) != "" {
		cfg.Logger, _ = zap.NewDevelopment()
	}
	rt, err := watchtree.New(cfg)
	if err != nil {
		return fail("New: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := rt.Start(sctx); err != nil {
		return fail("Start: %v", err)
	}
	wdb := cl.Database(db)
	apply := func(ctx context.Context, ev *watchtree.Event[Order]) error {
		id, ok := ev.DocumentID().AsInt64OK()
		if !ok {
			return watchtree.Permanent(fmt.Errorf("document key %v is not an int64", ev.DocumentKey()))
		}
		return incCounter(ctx, wdb, id, ev.ID(), run)
	}
	_, err = rt.Spawn(sctx, withCursor(watchtree.Stream[Order]{
		Name: txnWorkerStream, Collection: "orders", Mode: watchtree.SingleLeader, Lanes: lanes, Transactional: true,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 10, SaveInterval: 100 * time.Millisecond, MaxUnflushed: leaderMaxUnflushed},
		OnInsert:   apply,
		OnUpdate:   apply,
	}))
	if err != nil {
		return fail("Spawn: %v", err)
	}
	if _, err := wdb.Collection("workers").InsertOne(sctx, bson.D{{Key: "_id", Value: run}}); err != nil {
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

// orderWriter writes orders until stopped: inserts of 1..docs first, then $inc updates of
// them in turn, paced. It counts the committed writes of each order (each is one event).
type orderWriter struct {
	mu     sync.Mutex
	writes map[int64]int
	total  int
	stop   chan struct{}
	halt   sync.Once
	done   chan struct{}
}

func startOrderWriter(e *env, docs int64) *orderWriter {
	w := &orderWriter{writes: map[int64]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	// A test that fails before finish stops the writer too, before the environment goes: its
	// writes report failures through the test, which must still be running.
	e.t.Cleanup(func() { w.halt.Do(func() { close(w.stop) }); <-w.done })
	coll := e.db.Collection("orders")
	go func() {
		defer close(w.done)
		for n := int64(0); ; n++ {
			select {
			case <-w.stop:
				return
			default:
			}
			id := n%docs + 1
			e.must(func(ctx context.Context) error {
				if n < docs {
					_, err := coll.InsertOne(ctx, Order{ID: id, Key: fmt.Sprint(id)})
					return err
				}
				_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
				return err
			})
			w.mu.Lock()
			w.writes[id]++
			w.total++
			w.mu.Unlock()
			time.Sleep(3 * time.Millisecond) // pacing of the load, not a wait
		}
	}()
	return w
}

// finish stops the writer and returns the writes per order and their total.
func (w *orderWriter) finish() (map[int64]int, int) {
	w.halt.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.total
}

// envTxnDrillScale multiplies TestTransactionalCrashDrill's size: its orders and the events
// each term handles before its fault (make drill-exactly runs it at 10).
const envTxnDrillScale = "WATCHTREE_IT_TXN_DRILL_SCALE"

// TestTransactionalCrashDrill is the exactly-once drill: worker processes share a SingleLeader
// Transactional stream whose handler $incs a per-order counter and appends to a log, under a
// steady load of inserts and updates. The leader is SIGKILLed four times (each replaced by a
// new process; from the third on with 2 lanes instead of 4, so the lane count changes between
// terms), then frozen by SIGSTOP past its lease until the other process leads, and thawed.
// Afterwards every order's counter equals its number of writes, and the log holds every event
// once: 0 lost, 0 duplicates, checked order by order.
func TestTransactionalCrashDrill(t *testing.T) {
	e := newEnv(t)
	alive := map[int]bool{}
	workers := map[int]*worker{}
	next := 1
	start := func(lanes int) {
		workers[next] = startWorkerMode(t, e, next, "txn", fmt.Sprintf("%s=%d", envWorkerLanes, lanes))
		alive[next] = true
		next++
	}
	scale := int64(1)
	if v := os.Getenv(envTxnDrillScale); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", envTxnDrillScale, v)
		}
		scale = n
	}
	start(4)
	start(4)
	e.waitProcLeader(alive)
	w := startOrderWriter(e, 60*scale)
	progress := func(what string, run int, more int64) {
		t.Helper()
		more *= scale
		base := e.collCount("log", bson.D{{Key: "run", Value: run}})
		waitFor(t, what, func() bool { return e.collCount("log", bson.D{{Key: "run", Value: run}}) >= base+more }, workers[run].stderr.String)
	}
	for k := 1; k <= 4; k++ {
		leader := e.waitProcLeader(alive)
		progress(fmt.Sprintf("kill %d: the leader %d handling events", k, leader), leader, 20)
		if err := workers[leader].cmd.Process.Kill(); err != nil {
			t.Fatalf("SIGKILL: %v", err)
		}
		_ = workers[leader].wait(t)
		alive[leader] = false
		lanes := 4
		if k >= 2 {
			lanes = 2
		}
		start(lanes)
	}
	frozen := e.waitProcLeader(alive)
	progress("the leader before the freeze handling events", frozen, 20)
	if err := workers[frozen].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	var other int
	waitFor(t, "another process leading after the freeze", func() bool {
		l := e.procLeaders(alive)
		for _, r := range l {
			if r != frozen {
				other = r
				return true
			}
		}
		return false
	})
	progress("the new leader handling events", other, 20)
	if err := workers[frozen].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	progress("the new leader after the thaw", other, 20)
	if scale > 1 {
		// At scale, the load goes on past the faults to scale × the drill's usual ~2,400 writes.
		want := int(2400 * scale)
		waitWithin(t, time.Duration(scale)*time.Minute, fmt.Sprintf("%d writes", want), func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.total >= want
		})
	}
	writes, total := w.finish()
	t.Logf("%d writes over %d orders; 4 SIGKILLs, 1 SIGSTOP past the lease, lanes 4 then 2", total, len(writes))
	// The backlog after the last fault may take longer than waitLimit (under -race): wait while
	// the log grows, and fail when it stops growing short of the total.
	for last, lastAt := int64(-1), time.Now(); ; time.Sleep(50 * time.Millisecond) {
		n := e.collCount("log", bson.D{})
		if n >= int64(total) {
			break
		}
		if n > last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > waitLimit {
			var stderr strings.Builder
			for run, w := range workers {
				if alive[run] {
					fmt.Fprintf(&stderr, "--- worker %d:\n%s\n", run, w.stderr.String())
				}
			}
			t.Fatalf("the log stopped at %d of %d entries for %v\n%s", n, total, waitLimit, stderr.String())
		}
	}
	waitFor(t, "a checkpoint", func() bool {
		cp, ok := e.checkpointOf(txnWorkerStream, "")
		return ok && cp.Token != nil && e.collCount("log", bson.D{}) >= int64(total)
	})
	counters := e.counters()
	lost, dup := 0, 0
	for id, n := range writes {
		switch got := counters[id]; {
		case got < n:
			lost += n - got
			t.Errorf("order %d: counter %d, %d writes: %d lost", id, got, n, n-got)
		case got > n:
			dup += got - n
			t.Errorf("order %d: counter %d, %d writes: %d applied twice", id, got, n, got-n)
		}
	}
	entries, dups := e.logStats()
	t.Logf("counters: %d lost, %d duplicated; log: %d entries for %d writes, %d duplicates", lost, dup, entries, total, dups)
	if entries != total || dups != 0 {
		t.Errorf("log: %d entries, %d duplicates; want %d and 0", entries, dups, total)
	}
}

// TestTransactionalBatches: with TxBatch, the events queued on a lane share transactions (far
// fewer commits than events). The orders are written while the stream is stopped, so
// after its restart its first batch is full: refused as too large (313, by a fail point on the
// first two commits), it is split in halves, and no event fails an attempt for it. A poison
// order aborts its batch, whose events then run one at a time, so the poison order alone is
// dead-lettered. Every other order is counted once.
func TestTransactionalBatches(t *testing.T) {
	e := newEnv(t)
	const orders, poison = 400, int64(377)
	// The handler's collections exist: transactions that create one conflict with each other.
	e.createColl("counters", false)
	e.createColl("log", false)
	var db *mongo.Database
	spec := watchtree.Stream[Order]{Name: "batches", Collection: "orders", Transactional: true,
		TxBatch: watchtree.TxBatchPolicy{MaxEvents: 50}, Retry: quickRetry,
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			if err := incCounter(ctx, db, ev.FullDocument.ID, ev.ID(), 0); err != nil {
				return err
			}
			if ev.FullDocument.ID == poison {
				return watchtree.Permanent(errors.New("poison order"))
			}
			return nil
		}}
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: 0})
		return err
	})
	first := e.startRuntime(nil)
	first.waitRunning(t, first.spawn(t, spec))
	first.stop(t) // the position is saved: the next runtime resumes from it
	r := e.startRuntime(nil)
	db = r.client.Database(e.dbName)
	docs := make([]any, 0, orders)
	for i := int64(1); i <= orders; i++ {
		docs = append(docs, Order{ID: i})
	}
	// The stream's first change-stream batch after the restart holds one event: an update,
	// which has no handler (settled without a transaction), so the inserts come in full batches.
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").UpdateOne(ctx, bson.D{{Key: "_id", Value: int64(0)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
		return err
	})
	e.must(func(ctx context.Context) error { _, err := e.db.Collection("orders").InsertMany(ctx, docs); return err })
	if !e.real() {
		e.failPoint(bson.D{{Key: "times", Value: 2}}, bson.D{{Key: "failCommands", Value: bson.A{"commitTransaction"}},
			{Key: "errorCode", Value: 313}, {Key: "appName", Value: r.app}})
	}
	commits0 := r.cmds.count("commitTransaction")
	r.waitRunning(t, r.spawn(t, spec))
	waitFor(t, "every good order counted", func() bool { return len(e.counters()) == orders-1 }, r.obs.dump)
	waitFor(t, "the poison order dead-lettered", func() bool { return len(r.obs.find(ofType[observe.DeadLettered])) == 1 }, r.obs.dump)
	for id, n := range e.counters() {
		if n != 1 || id == poison {
			t.Errorf("order %d counted %d times", id, n)
		}
	}
	if n, dups := e.logStats(); n != orders-1 || dups != 0 {
		t.Errorf("log: %d entries, %d duplicates; want %d and 0", n, dups, orders-1)
	}
	if retries := r.obs.find(ofType[observe.RetryScheduled]); len(retries) != 0 {
		t.Errorf("%d failed attempts, want none (a batch too large splits): %v", len(retries), retries)
	}
	commits := r.cmds.count("commitTransaction") - commits0
	t.Logf("%d orders in %d commits", orders, commits)
	if commits > orders/4 {
		t.Errorf("%d commits for %d orders: the events did not share transactions", commits, orders)
	}
}
