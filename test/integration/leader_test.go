package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/store/redisstore"
)

// testLease is the lease policy of these tests: short, so that failovers take seconds. Its
// Margin (how long before the lease can expire a leader that cannot renew stops) is wider than
// TTL/10, so that a leader's demotion timer still fires in time on a machine loaded by a
// parallel test run.
var testLease = watchtree.LeasePolicy{TTL: 2 * time.Second, RenewEvery: 400 * time.Millisecond, StandbyPoll: time.Second,
	Margin: 500 * time.Millisecond}

// balanceLease is the policy of the balance test, with more room for renewals: 36 trees share
// the machine with a parallel test run.
var balanceLease = watchtree.LeasePolicy{TTL: 6 * time.Second, RenewEvery: time.Second, StandbyPoll: 2 * time.Second}

// leaseBackend names a lease store the SingleLeader tests run on: the default MongoDB store, or
// the real Redis (WATCHTREE_REDIS_ADDR, default 127.0.0.1:6379) under a key prefix of the test's
// own.
type leaseBackend struct {
	name string
	// leases returns the store one runtime uses (nil: the default MongoDB store); every runtime
	// of a test shares the same keys.
	leases func(t *testing.T) store.LeaseStore
}

var leaseBackends = []leaseBackend{
	{name: "mongo"},
	{name: "redis", leases: redisLeases},
}

// redisPrefixes keeps one key prefix per test, shared by that test's runtimes.
var redisPrefixes sync.Map

func redisLeases(t *testing.T) store.LeaseStore {
	t.Helper()
	addr := os.Getenv("WATCHTREE_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("Redis at %s does not answer: %v", addr, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	p, loaded := redisPrefixes.LoadOrStore(t.Name(), "wt-it:"+hex.EncodeToString(b[:])+":")
	prefix := p.(string)
	if !loaded {
		t.Cleanup(func() {
			redisPrefixes.Delete(t.Name())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c := redis.NewClient(&redis.Options{Addr: addr})
			defer c.Close()
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
		})
	}
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// faultyLeases wraps a lease store with the faults a test injects: frozen blocks this
// instance's renewals until their context ends (a leader frozen in its lease I/O); down fails
// every lease call (the lease store unreachable); cut fails every call at once, heartbeats and
// instance listings included, and silences the lease watch: the instance is dead as far as the
// others can tell (crashed or partitioned), so its leases and heartbeat are never renewed nor
// released and must expire.
type faultyLeases struct {
	store.LeaseStore
	frozen, down, cut *atomic.Bool
}

var (
	errStoreDown = errors.New("test: lease store down")
	errStoreCut  = errors.New("test: instance cut off from the lease store")
)

func (f faultyLeases) isCut() bool { return f.cut != nil && f.cut.Load() }

func (f faultyLeases) fault(ctx context.Context) error {
	if f.isCut() {
		return errStoreCut
	}
	if f.down != nil && f.down.Load() {
		return errStoreDown
	}
	return nil
}

func (f faultyLeases) Heartbeat(ctx context.Context, id string, ttl time.Duration) error {
	if f.isCut() {
		return errStoreCut
	}
	return f.LeaseStore.Heartbeat(ctx, id, ttl)
}

func (f faultyLeases) Instances(ctx context.Context) ([]store.Instance, error) {
	if f.isCut() {
		return nil, errStoreCut
	}
	return f.LeaseStore.Instances(ctx)
}

func (f faultyLeases) Leave(ctx context.Context, id string) error {
	if f.isCut() {
		return errStoreCut
	}
	return f.LeaseStore.Leave(ctx, id)
}

// WatchLease forwards the store's notifications until the instance is cut off; the forwarding
// goroutine ends when the store closes its channel (when ctx ends).
func (f faultyLeases) WatchLease(ctx context.Context, name string) <-chan struct{} {
	in := f.LeaseStore.WatchLease(ctx, name)
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range in {
			if f.isCut() {
				continue
			}
			select {
			case out <- struct{}{}:
			default: // coalesced: a notification is already pending
			}
		}
	}()
	return out
}

func (f faultyLeases) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (store.Lease, error) {
	if err := f.fault(ctx); err != nil {
		return store.Lease{}, err
	}
	return f.LeaseStore.Acquire(ctx, name, owner, ttl)
}

func (f faultyLeases) Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (store.Lease, error) {
	if err := f.fault(ctx); err != nil {
		return store.Lease{}, err
	}
	if f.frozen != nil && f.frozen.Load() {
		<-ctx.Done()
		return store.Lease{}, ctx.Err()
	}
	return f.LeaseStore.Renew(ctx, name, owner, epoch, ttl)
}

func (f faultyLeases) Release(ctx context.Context, name, owner string, epoch int64) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	return f.LeaseStore.Release(ctx, name, owner, epoch)
}

func (f faultyLeases) GetLease(ctx context.Context, name string) (store.Lease, bool, error) {
	if err := f.fault(ctx); err != nil {
		return store.Lease{}, false, err
	}
	return f.LeaseStore.GetLease(ctx, name)
}

// clusterSaveEvery is the Checkpoint.SaveEvery of a leaderCluster's streams.
const clusterSaveEvery = 20

// leaderCluster is several runtimes on one deployment, each running the same SingleLeader
// streams; every delivery is recorded with the runtime that made it.
type leaderCluster struct {
	t       *testing.T
	e       *env
	backend leaseBackend
	lease   watchtree.LeasePolicy
	streams []string
	faults  []faultyLeases
	// wrapMongo: on the MongoDB backend too, each runtime gets its own lease store (the
	// runtime's database, default collections) behind its faultyLeases, so that it can be cut.
	wrapMongo bool

	mu      sync.Mutex
	rts     []*rtEnv
	handles [][]*watchtree.Handle
	seen    map[string]map[int64]int // stream → order id → deliveries
	byRT    []atomic.Int64           // deliveries per runtime
	lastAt  []atomic.Int64           // unix nanos of each runtime's latest delivery
	firstAt []atomic.Int64           // unix nanos of each runtime's first delivery after mark
}

func newLeaderCluster(t *testing.T, e *env, backend leaseBackend, lease watchtree.LeasePolicy, streams ...string) *leaderCluster {
	return &leaderCluster{t: t, e: e, backend: backend, lease: lease, streams: streams, seen: map[string]map[int64]int{},
		byRT: make([]atomic.Int64, 8), lastAt: make([]atomic.Int64, 8), firstAt: make([]atomic.Int64, 8)}
}

// add starts one more runtime (index i = its position) and spawns every stream on it.
func (c *leaderCluster) add() int {
	c.t.Helper()
	i := len(c.rts)
	f := faultyLeases{frozen: &atomic.Bool{}, down: &atomic.Bool{}, cut: &atomic.Bool{}}
	r := c.e.startRuntime(func(cfg *watchtree.Config) {
		cfg.Lease = c.lease
		cfg.InstanceID = fmt.Sprintf("instance-%d", i)
		switch {
		case c.backend.leases != nil:
			f.LeaseStore = c.backend.leases(c.t)
			cfg.Leases = f
		case c.wrapMongo:
			ms, err := mongostore.New(cfg.Client.Database(cfg.Database), mongostore.Options{})
			if err != nil {
				c.t.Fatal(err)
			}
			f.LeaseStore = ms
			cfg.Leases = f
		}
	})
	c.mu.Lock()
	c.rts = append(c.rts, r)
	c.faults = append(c.faults, f)
	c.mu.Unlock()
	var hs []*watchtree.Handle
	for _, name := range c.streams {
		hs = append(hs, r.spawn(c.t, watchtree.Stream[Order]{
			Name: name, Collection: "orders", Mode: watchtree.SingleLeader,
			Checkpoint: watchtree.CheckpointPolicy{SaveEvery: clusterSaveEvery, SaveInterval: 100 * time.Millisecond},
			OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
				c.record(i, name, ev.FullDocument.ID)
				return nil
			},
		}))
	}
	c.mu.Lock()
	c.handles = append(c.handles, hs)
	c.mu.Unlock()
	return i
}

func (c *leaderCluster) record(rt int, stream string, id int64) {
	now := time.Now().UnixNano()
	c.byRT[rt].Add(1)
	c.lastAt[rt].Store(now)
	c.firstAt[rt].CompareAndSwap(0, now)
	c.mu.Lock()
	m := c.seen[stream]
	if m == nil {
		m = map[int64]int{}
		c.seen[stream] = m
	}
	m[id]++
	c.mu.Unlock()
}

// markFirst resets the first-delivery times.
func (c *leaderCluster) markFirst() {
	for i := range c.firstAt {
		c.firstAt[i].Store(0)
	}
}

// counts returns, for stream, the distinct orders delivered and the duplicate deliveries.
func (c *leaderCluster) counts(stream string) (distinct, dups int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.seen[stream] {
		distinct++
		dups += n - 1
	}
	return distinct, dups
}

// missing lists the orders 1..n not delivered on stream.
func (c *leaderCluster) missing(stream string, n int64) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int64
	for id := int64(1); id <= n; id++ {
		if c.seen[stream][id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// waitAll waits until orders 1..n were all delivered on every stream.
func (c *leaderCluster) waitAll(n int64) {
	c.t.Helper()
	for _, s := range c.streams {
		waitFor(c.t, fmt.Sprintf("orders 1..%d delivered on %s", n, s), func() bool { return len(c.missing(s, n)) == 0 },
			func() string { return fmt.Sprintf("missing %v", c.missing(s, n)) })
	}
}

// roles returns, for stream index si, the lease role of each live runtime ("" for a stopped one),
// asking the runtimes in parallel.
func (c *leaderCluster) roles(si int, alive []bool) []string {
	out := make([]string, len(c.handles))
	var wg sync.WaitGroup
	for i, hs := range c.handles {
		if !alive[i] {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := hs[si].Status(ctx)
			cancel()
			if err == nil && st.Lease != nil {
				out[i] = st.Lease.Role
				if st.Lease.Role == watchtree.RoleLeader && st.State != watchtree.StateRunning && st.State != watchtree.StateStarting {
					out[i] = "leader-but-" + string(st.State)
				}
			}
		})
	}
	wg.Wait()
	return out
}

// leader waits until exactly one live runtime leads stream si and returns it.
func (c *leaderCluster) leader(si int, alive []bool) int {
	c.t.Helper()
	who := -1
	var last []string
	waitFor(c.t, "exactly one leader of "+c.streams[si], func() bool {
		last = c.roles(si, alive)
		n := 0
		for i, r := range last {
			if r == watchtree.RoleLeader {
				n, who = n+1, i
			}
		}
		return n == 1
	}, func() string { return fmt.Sprintf("roles %v", last) })
	return who
}

// sampleOneLeader samples the roles n times and fails on any sample without exactly one leader.
func (c *leaderCluster) sampleOneLeader(si int, alive []bool, n int) {
	c.t.Helper()
	for k := range n {
		roles := c.roles(si, alive)
		leaders := 0
		for _, r := range roles {
			if r == watchtree.RoleLeader {
				leaders++
			}
		}
		if leaders != 1 {
			c.t.Fatalf("sample %d: %d leaders of %s, want exactly 1 (roles %v)", k, leaders, c.streams[si], roles)
		}
		time.Sleep(5 * time.Millisecond) // the sampling period, not a wait for an outcome
	}
}

func allAlive(n int) []bool {
	a := make([]bool, n)
	for i := range a {
		a[i] = true
	}
	return a
}

// TestSingleLeaderHandover: three runtimes share one SingleLeader stream; sampled over time
// exactly one leads. Stopping the leader under load hands over to a standby, then again to the
// last one; every order is delivered, and a graceful handover redelivers nothing.
func TestSingleLeaderHandover(t *testing.T) {
	for _, b := range leaseBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t)
			c := newLeaderCluster(t, e, b, testLease, "billing")
			for range 3 {
				c.add()
			}
			alive := allAlive(3)
			first := c.leader(0, alive)
			c.sampleOneLeader(0, alive, 40)
			e.insertOrders("orders", 1, 100)
			c.waitAll(100)
			if n := c.byRT[first].Load(); n != 100 {
				t.Fatalf("the leader handled %d of 100 orders", n)
			}

			next := int64(101)
			for round := range 2 {
				// Under load: a writer inserts while the leader stops.
				done := make(chan struct{})
				var wrote atomic.Int64
				wrote.Store(next - 1)
				go func() {
					defer close(done)
					for id := next; id < next+150; id++ {
						e.insertOrders("orders", id, id)
						wrote.Store(id)
					}
				}()
				waitFor(t, "writer under way", func() bool { return wrote.Load() >= next+20 })
				old := c.leader(0, alive)
				c.markFirst()
				stopAt := time.Now()
				c.rts[old].stop(t)
				stopped := time.Now()
				alive[old] = false
				oldCount := c.byRT[old].Load()
				nl := c.leader(0, alive)
				waitFor(t, "the new leader's first delivery", func() bool { return c.firstAt[nl].Load() != 0 })
				took := time.Unix(0, c.firstAt[nl].Load()).Sub(stopAt)
				t.Logf("round %d: handover from instance-%d to instance-%d: %v from the stop call to the first event handled (stop took %v)",
					round, old, nl, took, stopped.Sub(stopAt))
				if took > 10*time.Second {
					t.Errorf("handover took %v, want well under the TTL-based failover", took)
				}
				<-done
				next += 150
				c.waitAll(next - 1)
				if got := c.byRT[old].Load(); got != oldCount {
					t.Errorf("the stopped leader handled %d more events after its stop", got-oldCount)
				}
				if round == 0 {
					c.sampleOneLeader(0, alive, 20)
				}
			}
			if _, dups := c.counts("billing"); dups != 0 {
				t.Errorf("%d duplicate deliveries across graceful handovers, want 0", dups)
			}
		})
	}
}

// leadershipAt returns the time of the first LeadershipChanged of change on r after since
// (zero when none).
func leadershipAt(r *rtEnv, change observe.LeadershipChange, since time.Time) time.Time {
	for _, ev := range r.obs.all() {
		if lc, ok := ev.(observe.LeadershipChanged); ok && lc.Change == change && !lc.Time.Before(since) {
			return lc.Time
		}
	}
	return time.Time{}
}

// checkpointsAfter counts r's Checkpointed events after at.
func checkpointsAfter(r *rtEnv, at time.Time) int {
	n := 0
	for _, ev := range r.obs.all() {
		if cp, ok := ev.(observe.Checkpointed); ok && cp.Time.After(at) {
			n++
		}
	}
	return n
}

// background inserts orders from..to one by one until done; wrote is the last one written.
func background(e *env, from, to int64) (wrote *atomic.Int64, done chan struct{}) {
	wrote, done = &atomic.Int64{}, make(chan struct{})
	wrote.Store(from - 1)
	go func() {
		defer close(done)
		for id := from; id <= to; id++ {
			e.insertOrders("orders", id, id)
			wrote.Store(id)
			time.Sleep(2 * time.Millisecond) // pacing of the load, not a wait
		}
	}()
	return wrote, done
}

// TestSingleLeaderSplitBrain freezes the leader's renewals (MongoDB: a failCommand fail point
// blocking its findAndModify commands; Redis: its renewals hang) past its lease. It must stop
// processing by itself before the lease can expire, so the new leader acquires only after that,
// and it writes no checkpoint once the new leader holds the lease. Nothing is lost.
func TestSingleLeaderSplitBrain(t *testing.T) {
	for _, b := range leaseBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t)
			c := newLeaderCluster(t, e, b, testLease, "payments")
			c.add()
			c.add()
			old := c.leader(0, allAlive(2))
			other := 1 - old
			e.insertOrders("orders", 1, 50)
			c.waitAll(50)

			wrote, done := background(e, 51, 400)
			waitFor(t, "writer under way", func() bool { return wrote.Load() >= 80 })
			freezeAt := time.Now()
			if b.leases == nil {
				e.failPoint("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"findAndModify"}},
					{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 4000}, {Key: "appName", Value: c.rts[old].app}})
			} else {
				c.faults[old].frozen.Store(true)
			}
			c.rts[old].obs.wait(t, "the frozen leader's loss", func(ev observe.Event) bool {
				lc, ok := ev.(observe.LeadershipChanged)
				return ok && lc.Change == observe.LeadershipLost
			})
			c.rts[other].obs.wait(t, "the standby's acquisition", func(ev observe.Event) bool {
				lc, ok := ev.(observe.LeadershipChanged)
				return ok && lc.Change == observe.LeadershipAcquired && lc.Time.After(freezeAt)
			})
			lostAt := leadershipAt(c.rts[old], observe.LeadershipLost, freezeAt)
			acquiredAt := leadershipAt(c.rts[other], observe.LeadershipAcquired, freezeAt)
			t.Logf("frozen at 0, old leader stopped at %v, new leader acquired at %v", lostAt.Sub(freezeAt), acquiredAt.Sub(freezeAt))
			if !lostAt.Before(acquiredAt) {
				t.Fatalf("the old leader stopped at %v, after the new one acquired at %v", lostAt, acquiredAt)
			}
			if max := testLease.TTL; lostAt.Sub(freezeAt) > max {
				t.Errorf("the old leader stopped %v after the freeze, want within the TTL %v", lostAt.Sub(freezeAt), max)
			}
			<-done
			if b.leases == nil {
				e.failPointOff()
			} else {
				c.faults[old].frozen.Store(false)
			}
			c.waitAll(400)
			if last := time.Unix(0, c.lastAt[old].Load()); last.After(acquiredAt) {
				t.Errorf("the old leader handled an event at %v, after the new leader acquired at %v", last, acquiredAt)
			}
			if n := checkpointsAfter(c.rts[old], acquiredAt); n != 0 {
				t.Errorf("the old leader wrote %d checkpoints after the new leader acquired", n)
			}
			_, dups := c.counts("payments")
			t.Logf("duplicates across the split-brain failover: %d (the unflushed window)", dups)
		})
	}
}

// TestSingleLeaderStoreOutage takes the lease store down under a leader: the leader demotes
// itself before its lease can expire, no standby acquires while the store is down, and once it
// is back one instance leads and every order is delivered.
func TestSingleLeaderStoreOutage(t *testing.T) {
	for _, b := range leaseBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t)
			c := newLeaderCluster(t, e, b, testLease, "emails")
			c.add()
			c.add()
			c.leader(0, allAlive(2))
			e.insertOrders("orders", 1, 30)
			c.waitAll(30)

			downAt := time.Now()
			if b.leases == nil {
				// Every lease acquisition and renewal fails (the lease commands are findAndModify).
				e.failPoint("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"findAndModify"}},
					{Key: "errorCode", Value: 50}, {Key: "errorLabels", Value: bson.A{}}})
			} else {
				for _, f := range c.faults {
					f.down.Store(true)
				}
			}
			var lostAt time.Time
			waitFor(t, "the leader's demotion", func() bool {
				for _, r := range c.rts {
					if at := leadershipAt(r, observe.LeadershipLost, downAt); !at.IsZero() {
						lostAt = at
						return true
					}
				}
				return false
			})
			if d := lostAt.Sub(downAt); d > testLease.TTL-testLease.Margin+testLease.RenewEvery {
				t.Errorf("the leader demoted itself %v after the outage began, want by TTL - Margin after its last renewal", d)
			}
			// Past the lease's expiry, still down: nobody may acquire.
			for until := time.Now().Add(testLease.TTL + 500*time.Millisecond); time.Now().Before(until); {
				for i, r := range c.rts {
					if at := leadershipAt(r, observe.LeadershipAcquired, downAt); !at.IsZero() {
						t.Fatalf("instance-%d acquired the lease at %v while the store was down", i, at.Sub(downAt))
					}
				}
				time.Sleep(20 * time.Millisecond) // the sampling period of an absence check
			}
			e.insertOrders("orders", 31, 60)
			if b.leases == nil {
				e.failPointOff()
			} else {
				for _, f := range c.faults {
					f.down.Store(false)
				}
			}
			c.leader(0, allAlive(2))
			c.waitAll(60)
		})
	}
}

// leadCounts returns how many streams each live runtime leads, and whether every stream has
// exactly one leader.
func (c *leaderCluster) leadCounts(alive []bool) (counts []int, oneEach bool) {
	counts = make([]int, len(c.handles))
	oneEach = true
	all := make([][]string, len(c.streams))
	var wg sync.WaitGroup
	for si := range c.streams {
		wg.Go(func() { all[si] = c.roles(si, alive) })
	}
	wg.Wait()
	for si := range c.streams {
		n := 0
		for i, r := range all[si] {
			if r == watchtree.RoleLeader {
				counts[i]++
				n++
			}
		}
		oneEach = oneEach && n == 1
	}
	return counts, oneEach
}

// waitBalanced waits until every stream has one leader and each live runtime leads want.
func (c *leaderCluster) waitBalanced(alive []bool, want int) time.Duration {
	c.t.Helper()
	start := time.Now()
	var last []int
	waitFor(c.t, fmt.Sprintf("each live runtime leading %d streams", want), func() bool {
		counts, one := c.leadCounts(alive)
		last = counts
		if !one {
			return false
		}
		for i, n := range counts {
			if alive[i] && n != want {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("leaderships per runtime %v", last) })
	return time.Since(start)
}

// TestSingleLeaderBalance: 3 runtimes and 12 streams settle at 4 leaderships each. Then one
// runtime dies abruptly: it is cut off from the lease store and from MongoDB (every call fails
// at once, as a crashed or partitioned instance's would), so it neither renews, releases,
// heartbeats nor flushes a checkpoint. The other two take its streams only once its leases
// have expired on the store, and settle at 6 each; with a new runtime they are back at 4 each.
// Every order is delivered on every stream throughout, including those inserted while the dead
// runtime's leases ran out; only its streams redeliver, within its unflushed window.
func TestSingleLeaderBalance(t *testing.T) {
	for _, b := range leaseBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t)
			var names []string
			for i := range 12 {
				names = append(names, fmt.Sprintf("s%02d", i))
			}
			c := newLeaderCluster(t, e, b, balanceLease, names...)
			c.wrapMongo = true
			for range 3 {
				c.add()
			}
			alive := allAlive(3)
			t.Logf("3 runtimes balanced in %v", c.waitBalanced(alive, 4))
			e.insertOrders("orders", 1, 20)
			c.waitAll(20)

			// The streams the doomed runtime leads (settled: 4 of them).
			const dead = 2
			var orphans []string
			for si, s := range names {
				if c.roles(si, alive)[dead] == watchtree.RoleLeader {
					orphans = append(orphans, s)
				}
			}
			if len(orphans) != 4 {
				t.Fatalf("instance-%d leads %v, want 4 streams", dead, orphans)
			}
			// Its latest successful renewal was at most RenewEvery ago, so its leases expire on
			// the store no earlier than cutAt + TTL - RenewEvery.
			cutAt := time.Now()
			c.faults[dead].cut.Store(true)
			// Its MongoDB client is cut off too (a fail point on its appName), so that it can
			// neither read its change streams nor flush checkpoints: like a crashed process,
			// it leaves an unflushed window for the survivors to redeliver.
			e.failPoint("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"aggregate", "getMore", "find", "insert",
				"update", "delete", "findAndModify", "killCursors", "count", "bulkWrite"}},
				{Key: "errorCode", Value: 50}, {Key: "errorLabels", Value: bson.A{}}, {Key: "appName", Value: c.rts[dead].app}})
			alive[dead] = false
			deadAtCut := c.byRT[dead].Load()
			e.insertOrders("orders", 21, 40) // while its leases run out
			t.Logf("2 runtimes balanced in %v after the death", c.waitBalanced(alive, 6))
			earliest := cutAt.Add(balanceLease.TTL - balanceLease.RenewEvery - 250*time.Millisecond)
			for _, s := range orphans {
				var took time.Time
				for i := range dead {
					for _, ev := range c.rts[i].obs.all() {
						if lc, ok := ev.(observe.LeadershipChanged); ok && lc.Stream == s &&
							lc.Change == observe.LeadershipAcquired && lc.Time.After(cutAt) && (took.IsZero() || lc.Time.Before(took)) {
							took = lc.Time
						}
					}
				}
				lost := time.Time{}
				for _, ev := range c.rts[dead].obs.all() {
					if lc, ok := ev.(observe.LeadershipChanged); ok && lc.Stream == s && lc.Change == observe.LeadershipLost && lc.Time.After(cutAt) {
						lost = lc.Time
						break
					}
				}
				t.Logf("stream %s: the dead leader demoted itself at %v, a survivor acquired at %v after the cut",
					s, lost.Sub(cutAt), took.Sub(cutAt))
				if took.IsZero() {
					t.Errorf("stream %s: no survivor acquired it after the cut", s)
				} else if took.Before(earliest) {
					t.Errorf("stream %s: a survivor acquired it %v after the cut, before its lease could expire (%v)",
						s, took.Sub(cutAt), earliest.Sub(cutAt))
				}
				if lost.IsZero() || (!took.IsZero() && !lost.Before(took)) {
					t.Errorf("stream %s: the dead leader demoted itself at %v, want before the survivor acquired at %v",
						s, lost.Sub(cutAt), took.Sub(cutAt))
				}
			}
			c.waitAll(40)
			deadCount := c.byRT[dead].Load()
			t.Logf("the dead runtime handled %d events after the cut (in flight at the cut)", deadCount-deadAtCut)

			c.add()
			alive = append(alive, true)
			t.Logf("with a new runtime, balanced in %v", c.waitBalanced(alive, 4))
			e.insertOrders("orders", 41, 60)
			c.waitAll(60)
			if n := c.byRT[dead].Load(); n != deadCount {
				t.Errorf("the dead runtime handled %d events after its streams were taken over", n-deadCount)
			}
			// Only the dead runtime's streams may redeliver, and at most its unflushed window:
			// SaveEvery settlements pending plus one write of as many in flight. Graceful
			// handovers (to the new runtime) redeliver nothing.
			dups, window := 0, 2*clusterSaveEvery
			for _, s := range names {
				d, n := c.counts(s)
				dups += n
				if d != 60 {
					t.Errorf("stream %s: %d distinct orders delivered, want 60 (%d duplicates)", s, d, n)
				}
				switch orphan := slices.Contains(orphans, s); {
				case !orphan && n != 0:
					t.Errorf("stream %s, never led by the dead runtime: %d duplicate deliveries, want 0", s, n)
				case orphan && n > window:
					t.Errorf("stream %s: %d duplicate deliveries after the death, want at most the unflushed window %d", s, n, window)
				case orphan:
					t.Logf("stream %s: %d duplicates after the death", s, n)
				}
			}
			t.Logf("duplicates across the abrupt death: %d in all (the unflushed window)", dups)

			// The dead runtime stops now; its lease calls fail, which its Stop may report.
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			stopAt := time.Now()
			err := c.rts[dead].rt.Stop(ctx)
			t.Logf("the dead runtime's stop took %v: %v", time.Since(stopAt), err)
		})
	}
}

// TestSingleLeaderFencedWrites: a leader whose lease was taken over without its knowledge (its
// next renewal is far away) has its dead-letter write refused, and, once it leads again, its
// checkpoint write refused after a newer epoch claimed the checkpoint. Each time the stream
// stops at once, the fencing is reported, and nothing is lost: the refused dead letter and the
// events after the refused checkpoint are handled once the instance leads again.
func TestSingleLeaderFencedWrites(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(func(cfg *watchtree.Config) {
		cfg.InstanceID = "me"
		cfg.Lease = watchtree.LeasePolicy{} // renewals every 15s: the test acts between two
	})
	var handled atomic.Int64
	h := r.spawn(t, watchtree.Stream[Order]{Name: "fenced", Collection: "orders", Mode: watchtree.SingleLeader,
		Checkpoint: watchtree.CheckpointPolicy{SaveEvery: 1, SaveInterval: 50 * time.Millisecond},
		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
			if ev.FullDocument.Poison {
				return watchtree.Permanent(errors.New("poison"))
			}
			handled.Add(1)
			return nil
		}})
	waitState(t, h, watchtree.StateRunning)
	e.insertOrders("orders", 1, 5)
	waitFor(t, "5 orders handled", func() bool { return handled.Load() == 5 })

	leases := e.db.Collection("_wt_leases")
	steal := func() int64 {
		var l struct {
			Epoch int64 `bson:"epoch"`
		}
		e.must(func(ctx context.Context) error {
			return leases.FindOne(ctx, bson.D{{Key: "_id", Value: "fenced"}}).Decode(&l)
		})
		e.must(func(ctx context.Context) error {
			_, err := leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: "fenced"}}, bson.D{{Key: "$set", Value: bson.D{
				{Key: "owner", Value: "thief"}, {Key: "epoch", Value: l.Epoch + 1}, {Key: "expiresAt", Value: time.Now().Add(time.Hour)}}}})
			return err
		})
		return l.Epoch + 1
	}
	giveBack := func() {
		e.must(func(ctx context.Context) error {
			_, err := leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: "fenced"}}, bson.D{{Key: "$set", Value: bson.D{
				{Key: "owner", Value: ""}, {Key: "expiresAt", Value: time.Now().Add(-time.Second)}}}})
			return err
		})
	}
	fencings := func() int {
		return len(r.obs.find(func(ev observe.Event) bool {
			lc, ok := ev.(observe.LeadershipChanged)
			return ok && lc.Change == observe.LeadershipFenced
		}))
	}

	// 1. A dead-letter write under a lease another instance now holds.
	steal()
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("orders").InsertOne(ctx, Order{ID: 6, Poison: true})
		return err
	})
	waitFor(t, "the dead-letter write fenced", func() bool { return fencings() == 1 }, r.obs.dump)
	st := waitState(t, h, watchtree.StateStandby)
	if st.Lease == nil || st.Lease.Fenced < 1 || st.Lease.Instance != "me" {
		t.Fatalf("status after the fenced dead letter: %+v", st.Lease)
	}
	if n := e.collCount("_wt_dead_letters", nil); n != 0 {
		t.Fatalf("%d dead letters written under a lease held by another instance", n)
	}
	giveBack()
	waitState(t, h, watchtree.StateRunning)
	waitFor(t, "the poison order dead-lettered once the instance leads again", func() bool { return e.collCount("_wt_dead_letters", nil) == 1 })

	// 2. A checkpoint write after a newer epoch claimed the checkpoint.
	newer := steal()
	e.must(func(ctx context.Context) error {
		_, err := e.db.Collection("_wt_checkpoints").UpdateOne(ctx, bson.D{{Key: "_id", Value: "fenced"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: newer}, {Key: "owner", Value: "thief"}}}})
		return err
	})
	e.insertOrders("orders", 7, 10)
	waitFor(t, "the checkpoint write fenced", func() bool { return fencings() == 2 }, r.obs.dump)
	waitState(t, h, watchtree.StateStandby)
	giveBack()
	waitState(t, h, watchtree.StateRunning)
	e.insertOrders("orders", 11, 15)
	waitFor(t, "every order handled", func() bool { return handled.Load() >= 14 },
		func() string { return fmt.Sprintf("handled %d", handled.Load()) })
}

// TestMixedModes: AllInstances and SingleLeader streams side by side in two runtimes: the
// AllInstances stream is consumed by both and never touches the lease store, the SingleLeader
// stream by one.
func TestMixedModes(t *testing.T) {
	e := newEnv(t)
	var all, one [2]atomic.Int64
	var foreign, wideOrders atomic.Int64 // events of the database-wide stream: not orders, orders
	var hs [2]*watchtree.Handle
	for i := range 2 {
		// Balancing off: with two SingleLeader streams on two instances the balancer may hand
		// "one" over midway (a correct handover, but then both runtimes handled some of it).
		r := e.startRuntime(func(cfg *watchtree.Config) {
			cfg.Lease = testLease
			cfg.Lease.Balance = watchtree.BalanceOff
		})
		r.spawn(t, watchtree.Stream[Order]{Name: "all", Collection: "orders",
			OnInsert: func(context.Context, *watchtree.Event[Order]) error { all[i].Add(1); return nil }})
		// A database-wide SingleLeader stream on the store database: the lease renewals and
		// heartbeats (like the checkpoints) are not its events.
		r.spawn(t, watchtree.Stream[Order]{Name: "wide", Database: e.dbName, Mode: watchtree.SingleLeader,
			OnChange: func(_ context.Context, ev *watchtree.Event[Order]) error {
				if ev.Namespace().Coll != "orders" {
					foreign.Add(1)
				} else {
					wideOrders.Add(1)
				}
				return nil
			}})
		hs[i] = r.spawn(t, watchtree.Stream[Order]{Name: "one", Collection: "orders", Mode: watchtree.SingleLeader,
			OnInsert: func(context.Context, *watchtree.Event[Order]) error { one[i].Add(1); return nil }})
	}
	waitFor(t, "one leader", func() bool {
		n := 0
		for _, h := range hs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := h.Status(ctx)
			cancel()
			if err == nil && st.State == watchtree.StateRunning {
				n++
			}
		}
		return n == 1
	})
	e.insertOrders("orders", 1, 20)
	waitFor(t, "all orders on both AllInstances streams and once on the SingleLeader one", func() bool {
		return all[0].Load() == 20 && all[1].Load() == 20 && one[0].Load()+one[1].Load() == 20
	}, func() string {
		return fmt.Sprintf("all %d/%d, one %d/%d", all[0].Load(), all[1].Load(), one[0].Load(), one[1].Load())
	})
	// Let a lease renewal and an instance heartbeat happen while the streams are open, then one
	// more order: the database-wide stream has seen everything before it.
	beat := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		var l, i bson.M
		_ = e.db.Collection("_wt_leases").FindOne(ctx, bson.D{{Key: "_id", Value: "wide"}}).Decode(&l)
		_ = e.db.Collection("_wt_instances").FindOne(ctx, bson.D{}).Decode(&i)
		return fmt.Sprint(l["expiresAt"], i["expiresAt"])
	}
	before := beat()
	waitFor(t, "a renewal and a heartbeat", func() bool { return beat() != before })
	before = beat()
	waitFor(t, "another renewal and heartbeat", func() bool { return beat() != before })
	e.insertOrders("orders", 21, 21)
	waitFor(t, "order 21 on the database-wide stream", func() bool { return wideOrders.Load() >= 21 })
	if n := foreign.Load(); n != 0 {
		t.Errorf("the database-wide stream received %d events of watchtree's own collections", n)
	}
	if n := e.collCount("_wt_leases", bson.D{{Key: "_id", Value: "all"}}); n != 0 {
		t.Errorf("the AllInstances stream has %d lease records", n)
	}
	if one[0].Load() != 0 && one[1].Load() != 0 {
		t.Errorf("both runtimes handled the SingleLeader stream: %d and %d", one[0].Load(), one[1].Load())
	}
}
