package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/redisstore"
)

// countingLeases counts a lease store's calls by operation and can freeze every call (a
// crashed instance's lease I/O: it hangs until its context ends).
type countingLeases struct {
	store.LeaseStore
	acquire, renew, release atomic.Int64
	frozen                  *atomic.Bool
}

func (c *countingLeases) hang(ctx context.Context) error {
	if c.frozen != nil && c.frozen.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (c *countingLeases) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (store.Lease, error) {
	if err := c.hang(ctx); err != nil {
		return store.Lease{}, err
	}
	c.acquire.Add(1)
	return c.LeaseStore.Acquire(ctx, name, owner, ttl)
}

func (c *countingLeases) Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (store.Lease, error) {
	if err := c.hang(ctx); err != nil {
		return store.Lease{}, err
	}
	c.renew.Add(1)
	return c.LeaseStore.Renew(ctx, name, owner, epoch, ttl)
}

func (c *countingLeases) Release(ctx context.Context, name, owner string, epoch int64) error {
	if err := c.hang(ctx); err != nil {
		return err
	}
	c.release.Add(1)
	return c.LeaseStore.Release(ctx, name, owner, epoch)
}

// leaderNode is one runtime of a SingleLeader benchmark with its handles and delivery clock.
type leaderNode struct {
	rt      *watchtree.Runtime
	leases  *countingLeases
	handles map[string]*watchtree.Handle
	stop    func()
	first   atomic.Int64 // unix nanos of the first delivery since the last reset
}

// leaderBench is a mongosim deployment with SingleLeader runtimes on one database.
type leaderBench struct {
	b     *testing.B
	cl    *mongo.Client
	db    string
	lease watchtree.LeasePolicy
	store func() store.LeaseStore // nil: the default MongoDB store
}

var benchDBSeq atomic.Int64

func newLeaderBench(b *testing.B, lease watchtree.LeasePolicy, backend string) *leaderBench {
	_, cl := startMongosim(b)
	lb := &leaderBench{b: b, cl: cl, db: fmt.Sprintf("wt_bench_leader_%d", benchDBSeq.Add(1)), lease: lease}
	switch backend {
	case "mongo":
		lb.store = func() store.LeaseStore {
			s, err := newMongoLeases(cl, lb.db)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	case "redis":
		lb.store = redisBenchLeases(b)
	}
	return lb
}

// node starts a runtime whose lease calls are counted, spawns streams on it (all on the
// collection "orders"), and records its first delivery time.
func (lb *leaderBench) node(id string, mode watchtree.Mode, streams ...string) *leaderNode {
	b := lb.b
	n := &leaderNode{handles: map[string]*watchtree.Handle{}, leases: &countingLeases{frozen: &atomic.Bool{}}}
	n.leases.LeaseStore = lb.store()
	rt, err := watchtree.New(watchtree.Config{Client: lb.cl, Database: lb.db, InstanceID: id, Lease: lb.lease, Leases: n.leases})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	n.rt = rt
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			n.leases.frozen.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = rt.Stop(ctx)
		})
	}
	b.Cleanup(n.stop)
	for _, s := range streams {
		h, err := rt.Spawn(ctx, watchtree.Stream[order]{Name: s, Collection: "orders", Mode: mode,
			OnInsert: func(context.Context, *watchtree.Event[order]) error {
				n.first.CompareAndSwap(0, time.Now().UnixNano())
				return nil
			}})
		if err != nil {
			b.Fatal(err)
		}
		n.handles[s] = h
	}
	return n
}

// role returns the node's lease role of stream.
func (n *leaderNode) role(stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := n.handles[stream].Status(ctx)
	if err != nil || st.Lease == nil {
		return ""
	}
	return st.Lease.Role
}

// await polls cond (1ms period) for up to a minute.
func await(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling tick
	}
}

// writer inserts one order per millisecond into orders until stopped.
func writer(b *testing.B, c *mongo.Collection) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = c.InsertOne(ctx, order{ID: bson.NewObjectID(), Status: "new", Amount: 1})
			time.Sleep(time.Millisecond) // the load's pacing
		}
	}()
	return func() { cancel(); <-done }
}

func leaderOf(nodes []*leaderNode, stream string) int {
	for i, n := range nodes {
		if n.role(stream) == watchtree.RoleLeader {
			return i
		}
	}
	return -1
}

// BenchmarkLeaderGracefulHandover measures, with the default LeasePolicy, the time from the
// leader's Handle.Stop call to the first event handled by the new leader (target < 1s), under
// a load of one insert per millisecond. Baseline in the same run: the same Stop + Start of an
// AllInstances stream on one runtime, to its first event after the start.
func BenchmarkLeaderGracefulHandover(b *testing.B) {
	lb := newLeaderBench(b, watchtree.LeasePolicy{}, "mongo")
	nodes := []*leaderNode{lb.node("a", watchtree.SingleLeader, "sl"), lb.node("b", watchtree.SingleLeader, "sl")}
	base := lb.node("c", watchtree.AllInstances, "ai")
	stopW := writer(b, lb.cl.Database(lb.db).Collection("orders"))
	defer stopW()
	await(b, "a leader", func() bool { return leaderOf(nodes, "sl") >= 0 })
	ctx := context.Background()
	var handover, restart time.Duration
	b.ResetTimer()
	for range b.N {
		l := leaderOf(nodes, "sl")
		s := nodes[1-l]
		s.first.Store(0)
		start := time.Now()
		if err := nodes[l].handles["sl"].Stop(ctx); err != nil {
			b.Fatal(err)
		}
		await(b, "the new leader's first event", func() bool { return s.first.Load() != 0 })
		handover += time.Unix(0, s.first.Load()).Sub(start)
		b.StopTimer()
		if err := nodes[l].handles["sl"].Start(ctx); err != nil {
			b.Fatal(err)
		}
		await(b, "the old leader in standby", func() bool { return nodes[l].role("sl") == watchtree.RoleStandby })
		// Baseline: stop and start an AllInstances stream, to its first event.
		start = time.Now()
		if err := base.handles["ai"].Stop(ctx); err != nil {
			b.Fatal(err)
		}
		base.first.Store(0)
		if err := base.handles["ai"].Start(ctx); err != nil {
			b.Fatal(err)
		}
		await(b, "the restarted stream's first event", func() bool { return base.first.Load() != 0 })
		restart += time.Unix(0, base.first.Load()).Sub(start)
		b.StartTimer()
	}
	b.StopTimer()
	h, r := float64(handover.Milliseconds())/float64(b.N), float64(restart.Milliseconds())/float64(b.N)
	b.ReportMetric(h, "handover-ms")
	b.ReportMetric(r, "restart-baseline-ms")
	if r > 0 {
		b.ReportMetric(h/r, "handover/restart")
	}
	b.ReportMetric(h/1000, "handover/target-1s")
}

// BenchmarkLeaderCrashFailover measures the failover after a leader's crash with TTL 2s
// (RenewEvery 500ms, StandbyPoll the default 20s): the leader's lease I/O is frozen, as a dead
// process's would be, and the time runs from the freeze to the first event handled by the new
// leader. Target ≤ TTL + 0.5s; the polling formula TTL + StandbyPoll (22s here) is reported
// beside it.
func BenchmarkLeaderCrashFailover(b *testing.B) {
	for _, backend := range []string{"mongo", "redis"} {
		b.Run(backend, func(b *testing.B) {
			pol := watchtree.LeasePolicy{TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond}
			lb := newLeaderBench(b, pol, backend)
			nodes := []*leaderNode{lb.node("a", watchtree.SingleLeader, "sl"), lb.node("b", watchtree.SingleLeader, "sl")}
			stopW := writer(b, lb.cl.Database(lb.db).Collection("orders"))
			defer stopW()
			await(b, "a leader", func() bool { return leaderOf(nodes, "sl") >= 0 })
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				l := leaderOf(nodes, "sl")
				s := nodes[1-l]
				s.first.Store(0)
				start := time.Now()
				nodes[l].leases.frozen.Store(true)
				await(b, "the new leader's first event", func() bool { return s.first.Load() != 0 && s.role("sl") == watchtree.RoleLeader })
				total += time.Unix(0, s.first.Load()).Sub(start)
				b.StopTimer()
				nodes[l].leases.frozen.Store(false)
				await(b, "the frozen leader back in standby", func() bool { return nodes[l].role("sl") == watchtree.RoleStandby })
				b.StartTimer()
			}
			b.StopTimer()
			f := float64(total.Milliseconds()) / float64(b.N)
			p := pol
			p.StandbyPoll = defaultLease.StandbyPoll
			b.ReportMetric(f, "failover-ms")
			b.ReportMetric(float64((p.TTL + p.StandbyPoll).Milliseconds()), "polling-formula-ms")
			b.ReportMetric(f/float64((p.TTL+500*time.Millisecond).Milliseconds()), "failover/target")
		})
	}
}

// defaultLease is the zero LeasePolicy with the defaults its fields' godoc states.
var defaultLease = watchtree.LeasePolicy{TTL: 60 * time.Second, RenewEvery: 15 * time.Second, StandbyPoll: 20 * time.Second}

// BenchmarkLeaseWriteLoad counts the lease store calls of one stream's leader and standby over a
// window, with the default LeasePolicy scaled down tenfold (TTL 6s, RenewEvery 1.5s,
// StandbyPoll 2s, so that the window is short), and reports them per minute at the default
// policy (the counts scale with 1/period). The standby's count includes its retries at the
// expiry it saw (each a conditional write that changes nothing while the lease is held).
func BenchmarkLeaseWriteLoad(b *testing.B) {
	const scale = 10
	def := defaultLease
	pol := watchtree.LeasePolicy{TTL: def.TTL / scale, RenewEvery: def.RenewEvery / scale, StandbyPoll: def.StandbyPoll / scale}
	for _, backend := range []string{"mongo", "redis"} {
		b.Run(backend, func(b *testing.B) {
			lb := newLeaderBench(b, pol, backend)
			nodes := []*leaderNode{lb.node("a", watchtree.SingleLeader, "sl"), lb.node("b", watchtree.SingleLeader, "sl")}
			await(b, "a leader", func() bool { return leaderOf(nodes, "sl") >= 0 })
			l := leaderOf(nodes, "sl")
			window := 3 * pol.TTL
			b.ResetTimer()
			var leaderCalls, standbyCalls int64
			for range b.N {
				for _, n := range nodes {
					n.leases.acquire.Store(0)
					n.leases.renew.Store(0)
					n.leases.release.Store(0)
				}
				time.Sleep(window) // the measurement window
				ld, sb := nodes[l].leases, nodes[1-l].leases
				leaderCalls += ld.acquire.Load() + ld.renew.Load() + ld.release.Load()
				standbyCalls += sb.acquire.Load() + sb.renew.Load() + sb.release.Load()
			}
			b.StopTimer()
			perMinute := func(calls int64) float64 {
				return float64(calls) / float64(b.N) / window.Minutes() / scale
			}
			b.ReportMetric(perMinute(leaderCalls), "leader-calls/min")
			b.ReportMetric(perMinute(standbyCalls), "standby-calls/min")
			b.ReportMetric(float64(time.Minute/def.RenewEvery), "leader-formula/min")
		})
	}
}

// BenchmarkLeaderBalance30 measures the time for 3 instances and 30 SingleLeader streams,
// started together, to reach a balanced state (10 leaderships each, one leader per stream),
// with RenewEvery 500ms (the heartbeat period); renew-periods is the same time in units of
// RenewEvery, which carries over to other policies.
func BenchmarkLeaderBalance30(b *testing.B) {
	pol := watchtree.LeasePolicy{TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond, StandbyPoll: time.Second}
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		lb := newLeaderBench(b, pol, "mongo")
		lb.db = fmt.Sprintf("%s_%d", lb.db, i)
		b.StartTimer()
		start := time.Now()
		nodes := make([]*leaderNode, 3)
		var wg sync.WaitGroup
		for k := range nodes {
			wg.Go(func() { nodes[k] = lb.node(fmt.Sprintf("n%d", k), watchtree.SingleLeader, names...) })
		}
		wg.Wait()
		for k, n := range nodes {
			if n == nil { // its Spawn failed on its goroutine (logged there)
				b.Fatalf("node n%d did not start", k)
			}
		}
		await(b, "balance", func() bool {
			counts := make([]int, 3)
			for _, s := range names {
				leaders := 0
				for k, n := range nodes {
					if n.role(s) == watchtree.RoleLeader {
						counts[k]++
						leaders++
					}
				}
				if leaders != 1 {
					return false
				}
			}
			return counts[0] == 10 && counts[1] == 10 && counts[2] == 10
		})
		total += time.Since(start)
		b.StopTimer()
		for _, n := range nodes {
			n.stop()
		}
		b.StartTimer()
	}
	b.StopTimer()
	avg := total / time.Duration(b.N)
	b.ReportMetric(float64(avg.Milliseconds()), "balance-ms")
	b.ReportMetric(float64(avg)/float64(pol.RenewEvery), "renew-periods")
}

func redisBenchLeases(b *testing.B) func() store.LeaseStore {
	addr := os.Getenv("WATCHTREE_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	prefix := "wt-bench:" + hex.EncodeToString(rb[:]) + ":"
	b.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return func() store.LeaseStore {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		b.Cleanup(func() { _ = rdb.Close() })
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			b.Fatalf("Redis at %s: %v", addr, err)
		}
		s, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
}
