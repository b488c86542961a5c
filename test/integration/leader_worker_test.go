package integration_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store/redisstore"
)

// The SingleLeader worker process: the test binary re-executed with envWorkerMode=leader.
const (
	envWorkerRedisPrefix = "WATCHTREE_IT_WORKER_REDIS_PREFIX" // set: leases in Redis under it
	leaderWorkerStream   = "leaderproc"
	leaderMaxUnflushed   = 50
)

// leaderWorkerMain runs one runtime (InstanceID "proc-<run>", the tests' short lease policy)
// with the SingleLeader stream "leaderproc" on <db>.orders. Its handler records every delivery
// in <db>.deliveries as {event, doc, run}; its role (leader or standby) is kept in
// <db>.roles {_id: run, role}; {_id: run} in <db>.workers says it has spawned the stream. On
// SIGTERM it stops gracefully; SIGKILL ends it wherever it is.
func leaderWorkerMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "leader worker: "+format+"\n", args...)
		return 2
	}
	ctx, cl, db, run, done, err := workerSetup("wt-it-leader-worker")
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	obs := roleRecorder(cl.Database(db), run)
	cfg := watchtree.Config{Client: cl, Database: db, Observer: obs, InstanceID: fmt.Sprintf("proc-%d", run), Lease: testLease}
	if prefix := os.Getenv(envWorkerRedisPrefix); prefix != "" {
		addr := os.Getenv("WATCHTREE_REDIS_ADDR")
		if addr == "" {
			addr = "127.0.0.1:6379"
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		ls, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
		if err != nil {
			return fail("redisstore: %v", err)
		}
		cfg.Leases = ls
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
	deliveries := cl.Database(db).Collection("deliveries")
	_, err = rt.Spawn(sctx, withCursor(watchtree.Stream[Order]{
		Name: leaderWorkerStream, Collection: "orders", Mode: watchtree.SingleLeader, Lanes: 1,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 10, SaveInterval: 100 * time.Millisecond, MaxUnflushed: leaderMaxUnflushed},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			_, err := deliveries.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "doc", Value: ev.FullDocument.ID}, {Key: "run", Value: run},
				{Key: "at", Value: time.Now()}})
			return err
		},
	}))
	if err != nil {
		return fail("Spawn: %v", err)
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

// roleRecorder is a worker's Observer that keeps its role (leader or standby) in <db>.roles
// {_id: run, role}, written on the Observer's goroutine, in order, as the runtime reports it.
func roleRecorder(db *mongo.Database, run int) observe.Observer {
	roles := db.Collection("roles")
	return observe.Func(func(ev observe.Event) {
		lc, ok := ev.(observe.LeadershipChanged)
		if !ok {
			return
		}
		role := "standby"
		if lc.Change == observe.LeadershipAcquired {
			role = "leader"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = roles.UpdateOne(ctx, bson.D{{Key: "_id", Value: run}}, bson.D{{Key: "$set", Value: bson.D{{Key: "role", Value: role}}}},
			options.UpdateOne().SetUpsert(true))
	})
}

// startLeaderWorker starts leader worker run n (leases in Redis under redisPrefix when set) and
// waits until it has spawned its stream.
func startLeaderWorker(t *testing.T, e *env, n int, redisPrefix string) *worker {
	t.Helper()
	return startWorkerMode(t, e, n, "leader", envWorkerRedisPrefix+"="+redisPrefix)
}

// procLeaders returns the runs whose recorded role is leader, among alive.
func (e *env) procLeaders(alive map[int]bool) []int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cur, err := e.db.Collection("roles").Find(ctx, bson.D{{Key: "role", Value: "leader"}})
	if err != nil {
		e.t.Fatalf("roles: %v", err)
	}
	var docs []struct {
		ID int `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		e.t.Fatalf("roles: %v", err)
	}
	var out []int
	for _, d := range docs {
		if alive[d.ID] {
			out = append(out, d.ID)
		}
	}
	sort.Ints(out)
	return out
}

// waitProcLeader waits until exactly one live worker is leader and returns it.
func (e *env) waitProcLeader(alive map[int]bool) int {
	e.t.Helper()
	var last []int
	waitFor(e.t, "exactly one leader process", func() bool {
		last = e.procLeaders(alive)
		return len(last) == 1
	}, func() string { return fmt.Sprintf("leaders %v", last) })
	return last[0]
}

// deliveryStats returns the distinct orders delivered, the duplicate deliveries, and the time
// of the first delivery by a run other than not after since (zero when none).
func (e *env) deliveryStats(not int, since time.Time) (distinct, dups int, first time.Time) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cur, err := e.db.Collection("deliveries").Find(ctx, bson.D{})
	if err != nil {
		e.t.Fatalf("deliveries: %v", err)
	}
	var docs []struct {
		Doc int64     `bson:"doc"`
		Run int       `bson:"run"`
		At  time.Time `bson:"at"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		e.t.Fatalf("deliveries: %v", err)
	}
	seen := map[int64]int{}
	for _, d := range docs {
		seen[d.Doc]++
		if d.Run != not && d.At.After(since) && (first.IsZero() || d.At.Before(first)) {
			first = d.At
		}
	}
	for _, n := range seen {
		distinct++
		dups += n - 1
	}
	return distinct, dups, first
}

// TestSingleLeaderProcesses: three worker processes share one SingleLeader stream. Sampled over
// time exactly one leads. SIGKILL of the leader under load: a standby takes over once the lease
// expires and resumes from the checkpoint; nothing is lost and the duplicates stay within the
// unflushed window (MaxUnflushed). SIGTERM of the next leader hands over gracefully, with no
// further duplicates.
func TestSingleLeaderProcesses(t *testing.T) {
	for _, b := range leaseBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t)
			prefix := ""
			if b.leases != nil {
				b.leases(t) // checks Redis and registers the cleanup of the test's prefix
				p, _ := redisPrefixes.Load(t.Name())
				prefix = p.(string)
			}
			alive := map[int]bool{1: true, 2: true, 3: true}
			workers := map[int]*worker{}
			for n := 1; n <= 3; n++ {
				workers[n] = startLeaderWorker(t, e, n, prefix)
			}
			e.waitProcLeader(alive)
			for k := range 20 {
				if l := e.procLeaders(alive); len(l) != 1 {
					t.Fatalf("sample %d: leaders %v, want exactly one", k, l)
				}
				time.Sleep(10 * time.Millisecond) // the sampling period
			}

			wrote, done := background(e, 1, 300)
			waitFor(t, "deliveries under way", func() bool { d, _, _ := e.deliveryStats(0, time.Time{}); return d >= 60 })
			killed := e.waitProcLeader(alive)
			killAt := time.Now()
			if err := workers[killed].cmd.Process.Kill(); err != nil {
				t.Fatalf("SIGKILL: %v", err)
			}
			_ = workers[killed].wait(t)
			alive[killed] = false
			var first time.Time
			waitFor(t, "a delivery by another process after the SIGKILL", func() bool {
				_, _, first = e.deliveryStats(killed, killAt)
				return !first.IsZero()
			})
			failover := first.Sub(killAt)
			t.Logf("crash failover (TTL %v, StandbyPoll %v): %v from SIGKILL to the first event handled by the new leader; polling alone would take up to %v",
				testLease.TTL, testLease.StandbyPoll, failover, testLease.TTL+testLease.StandbyPoll)
			if failover > testLease.TTL+2*time.Second {
				t.Errorf("crash failover took %v, want about the TTL %v", failover, testLease.TTL)
			}
			<-done
			_ = wrote
			waitFor(t, "all 300 orders delivered", func() bool { d, _, _ := e.deliveryStats(0, time.Time{}); return d == 300 })
			_, dups, _ := e.deliveryStats(0, time.Time{})
			t.Logf("duplicates after the SIGKILL: %d (bound: MaxUnflushed %d)", dups, leaderMaxUnflushed)
			if dups > leaderMaxUnflushed {
				t.Errorf("%d duplicates, want at most the unflushed window %d", dups, leaderMaxUnflushed)
			}

			next := e.waitProcLeader(alive)
			if err := workers[next].cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("SIGTERM: %v", err)
			}
			if err := workers[next].wait(t); err != nil {
				t.Fatalf("worker %d stopped with %v\nstderr:\n%s", next, err, workers[next].stderr.String())
			}
			alive[next] = false
			e.waitProcLeader(alive)
			e.insertOrders("orders", 301, 350)
			waitFor(t, "all 350 orders delivered", func() bool { d, _, _ := e.deliveryStats(0, time.Time{}); return d == 350 })
			if _, d2, _ := e.deliveryStats(0, time.Time{}); d2 != dups {
				t.Errorf("the graceful handover added %d duplicates, want 0", d2-dups)
			}
		})
	}
}

// checkpointWrite is one write to the stream's checkpoint, as the server's change stream on
// _wt_checkpoints reports it.
type checkpointWrite struct {
	owner string
	epoch int64
	at    time.Time
}

// watchCheckpoints records every write of stream's checkpoint until the test ends.
func (e *env) watchCheckpoints(stream string) func() []checkpointWrite {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cs, err := e.db.Collection("_wt_checkpoints").Watch(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "documentKey._id", Value: stream}}}}},
		options.ChangeStream().SetFullDocument(options.UpdateLookup).SetMaxAwaitTime(100*time.Millisecond))
	if err != nil {
		cancel()
		e.t.Fatalf("watch checkpoints: %v", err)
	}
	var mu sync.Mutex
	var writes []checkpointWrite
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cs.Next(ctx) {
			var ev struct {
				Doc struct {
					Owner string `bson:"owner"`
					Epoch int64  `bson:"epoch"`
				} `bson:"fullDocument"`
			}
			if cs.Decode(&ev) == nil {
				mu.Lock()
				writes = append(writes, checkpointWrite{owner: ev.Doc.Owner, epoch: ev.Doc.Epoch, at: time.Now()})
				mu.Unlock()
			}
		}
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
		_ = cs.Close(context.Background())
	})
	return func() []checkpointWrite {
		mu.Lock()
		defer mu.Unlock()
		return append([]checkpointWrite(nil), writes...)
	}
}

// TestSingleLeaderSIGSTOP freezes the leader process (SIGSTOP) past its lease, until the other
// process leads and has handled events, then thaws it (SIGCONT). Every checkpoint write after
// the new leader acquired the lease is the new leader's (the thawed one's writes are fenced),
// and the thawed process stops processing by itself; nothing is lost.
func TestSingleLeaderSIGSTOP(t *testing.T) {
	e := newEnv(t)
	writes := e.watchCheckpoints(leaderWorkerStream)
	alive := map[int]bool{1: true, 2: true}
	workers := map[int]*worker{1: startLeaderWorker(t, e, 1, ""), 2: startLeaderWorker(t, e, 2, "")}
	old := e.waitProcLeader(alive)
	other := 3 - old
	_, done := background(e, 1, 400)
	waitFor(t, "deliveries under way", func() bool { d, _, _ := e.deliveryStats(0, time.Time{}); return d >= 50 })
	stopAt := time.Now()
	if err := workers[old].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	var first time.Time
	waitFor(t, "the other process handling events", func() bool {
		_, _, first = e.deliveryStats(old, stopAt)
		return !first.IsZero()
	})
	// The new leader's claim is its first checkpoint write under its epoch.
	var claim checkpointWrite
	waitFor(t, "the new leader's claim of the checkpoint", func() bool {
		for _, w := range writes() {
			if w.owner == fmt.Sprintf("proc-%d", other) && w.at.After(stopAt) {
				claim = w
				return true
			}
		}
		return false
	})
	waitFor(t, "the new leader past 20 events", func() bool {
		return e.collCount("deliveries", bson.D{{Key: "run", Value: other}}) >= 20
	})
	contAt := time.Now()
	if err := workers[old].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	<-done
	waitFor(t, "all 400 orders delivered", func() bool { d, _, _ := e.deliveryStats(0, time.Time{}); return d == 400 })
	for _, w := range writes() {
		if !w.at.Before(claim.at) && (w.owner != claim.owner || w.epoch < claim.epoch) {
			t.Errorf("checkpoint written by %s under epoch %d after %s claimed it under epoch %d", w.owner, w.epoch, claim.owner, claim.epoch)
		}
	}
	afterThaw := e.collCount("deliveries", bson.D{{Key: "run", Value: old}, {Key: "at", Value: bson.D{{Key: "$gt", Value: contAt}}}})
	late := e.collCount("deliveries", bson.D{{Key: "run", Value: old}, {Key: "at", Value: bson.D{{Key: "$gt", Value: contAt.Add(testLease.TTL)}}}})
	t.Logf("frozen leader: %d events handled right after the thaw (already in its lanes), %d after TTL past the thaw", afterThaw, late)
	if late != 0 {
		t.Errorf("the thawed leader handled %d events more than a TTL after the thaw: it did not stop by itself", late)
	}
	var roles []int
	waitFor(t, "only the new leader leads after the thaw", func() bool {
		roles = e.procLeaders(alive)
		return len(roles) == 1 && roles[0] == other
	}, func() string { return fmt.Sprintf("leaders %v", roles) })
}
