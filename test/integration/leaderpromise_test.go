package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// leaseStoreFor returns the lease store of backend b that the runtimes of this test share, for
// a test to act in it directly (the default MongoDB one on e's database, or the test's Redis
// prefix).
func leaseStoreFor(t *testing.T, e *env, r *rtEnv, b leaseBackend) store.LeaseStore {
	t.Helper()
	if b.leases != nil {
		return b.leases(t)
	}
	ms, err := mongostore.New(r.client.Database(e.dbName), mongostore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// Spawn of a new SingleLeader stream returns once its start position is fixed: every write
// made after Spawn returned is delivered, whether the lease was free (this instance leads at
// once) or held by an instance that died (this one leads only once that lease expired).
// Before, Spawn returned on the leader actor's first report, before its first acquisition, and
// the stream started from the position captured when it finally led: the writes in between
// were never delivered.
func TestSingleLeaderSpawnFixesThePosition(t *testing.T) {
	for _, b := range leaseBackends {
		for _, holder := range []string{"free", "dead holder"} {
			t.Run(b.name+"/"+holder, func(t *testing.T) {
				e := newEnv(t)
				r := e.startRuntime(func(cfg *watchtree.Config) {
					cfg.Lease = testLease
					cfg.InstanceID = "spawner"
					if b.leases != nil {
						cfg.Leases = b.leases(t)
					}
				})
				if holder == "dead holder" {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := leaseStoreFor(t, e, r, b).Acquire(ctx, "ledger", "dead-instance", testLease.TTL)
					cancel()
					if err != nil {
						t.Fatalf("acquire the lease for a dead instance: %v", err)
					}
				}
				got := newHandled()
				h := r.spawn(t, watchtree.Stream[Order]{Name: "ledger", Collection: "orders", Mode: watchtree.SingleLeader,
					OnInsert: got.handler()})
				e.insertOrders("orders", 1, 20) // right after Spawn returned
				waitFor(t, "orders 1..20 delivered", func() bool { return got.distinct() == 20 }, func() string {
					st, _ := h.Status(context.Background())
					return fmt.Sprintf("%d delivered; status %s: %s (lease %+v)", got.distinct(), st.State, st.Why, st.Lease)
				})
				if holder == "dead holder" {
					st, err := h.Status(context.Background())
					if err != nil || st.Lease == nil || st.Lease.Role != watchtree.RoleLeader {
						t.Fatalf("after the dead holder's lease expired: %+v, %v; want this instance leading", st.Lease, err)
					}
				}
			})
		}
	}
}

// A leader that loses its lease during a graceful stop stops handling at once: the drain is cut
// short, the in-flight call's context is cancelled, and no queued event starts, even with a
// handler that ignores its context. Before, the drain ran the rest of the backlog under a lease
// that a standby could already hold.
func TestSingleLeaderLeaseLostDuringStop(t *testing.T) {
	for _, b := range leaseBackends {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t)
			f := faultyLeases{frozen: &atomic.Bool{}, down: &atomic.Bool{}, cut: &atomic.Bool{}}
			r := e.startRuntime(func(cfg *watchtree.Config) {
				cfg.Lease = testLease
				cfg.InstanceID = "leader-a"
				if b.leases != nil {
					f.LeaseStore = b.leases(t)
				} else {
					ms, err := mongostore.New(cfg.Client.Database(cfg.Database), mongostore.Options{})
					if err != nil {
						t.Fatal(err)
					}
					f.LeaseStore = ms
				}
				cfg.Leases = f
			})
			var (
				mu        sync.Mutex
				starts    []time.Time
				cancelled atomic.Int64
			)
			h := r.spawn(t, watchtree.Stream[Order]{Name: "mailer", Collection: "orders", Mode: watchtree.SingleLeader,
				OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
					mu.Lock()
					starts = append(starts, time.Now())
					mu.Unlock()
					time.Sleep(100 * time.Millisecond) // a slow handler that ignores its context
					if ctx.Err() != nil {
						cancelled.Add(1)
					}
					return nil
				}})
			e.insertOrders("orders", 1, 60)
			calls := func() int { mu.Lock(); defer mu.Unlock(); return len(starts) }
			waitFor(t, "the backlog under way", func() bool { return calls() >= 3 })

			stopped := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				stopped <- h.Stop(ctx)
			}()
			waitState(t, h, watchtree.StateStopping)
			cutAt := time.Now()
			f.cut.Store(true) // the leader can no longer renew: it demotes itself before the lease can expire
			lost := r.obs.wait(t, "the leader's loss", func(ev observe.Event) bool {
				lc, ok := ev.(observe.LeadershipChanged)
				return ok && lc.Change == observe.LeadershipLost && lc.Time.After(cutAt)
			})
			lostAt := lost.EventMeta().Time
			var err error
			select {
			case err = <-stopped:
			case <-time.After(waitLimit):
				t.Fatal("Handle.Stop did not return")
			}
			st, serr := h.Status(context.Background())
			if serr != nil || st.LastStop == nil {
				t.Fatalf("status after the stop: %+v, %v", st, serr)
			}
			t.Logf("Stop returned %v after %v; report %+v", err, time.Since(cutAt).Round(time.Millisecond), *st.LastStop)
			if !st.LastStop.LeaseLost || st.LastStop.Flushed {
				t.Errorf("stop report %+v: want LeaseLost and no final checkpoint", *st.LastStop)
			}
			mu.Lock()
			after := 0
			for _, s := range starts {
				if s.After(lostAt) {
					after++
				}
			}
			total := len(starts)
			mu.Unlock()
			// One call may start in the instant between the leader actor's report and the
			// supervisor's handling of it; none after that.
			if after > 1 {
				t.Errorf("%d handler calls started after the lease was lost at %v (of %d in all), want at most 1",
					after, lostAt.Sub(cutAt).Round(time.Millisecond), total)
			}
			if total >= 60 {
				t.Errorf("all %d events were handled: the drain was not cut short", total)
			}
			if cancelled.Load() == 0 {
				t.Error("the call in flight at the loss did not see its context cancelled")
			}
		})
	}
}
