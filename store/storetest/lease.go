package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/watchtree/watchtree/store"
)

// trials is the number of rounds of the concurrent-acquirers case.
const trials = 100

// TestLeaseStore runs the lease contract against stores made by newStore (a fresh store per
// call, whose lease names no other test uses): free, held, expired, released and re-acquired
// leases; renewal and release by a non-owner or a stale epoch; epochs that only grow; exactly
// one winner among concurrent acquirers in each of trials rounds; the watch; the instance
// registry. Expiry is the store's own (its server clock), so the expiry cases wait for it with
// short TTLs, polling with a deadline.
func TestLeaseStore(t *testing.T, newStore func(t *testing.T) store.LeaseStore) {
	t.Helper()
	runSuite(t, newStore, []suiteCase[store.LeaseStore]{
		{"AcquireFree", leaseAcquireFree},
		{"AcquireHeld", leaseAcquireHeld},
		{"AcquireExpired", leaseAcquireExpired},
		{"ReleaseAndReacquire", leaseReleaseReacquire},
		{"ReacquireOwnStartsNewEpoch", leaseReacquireOwn},
		{"Renew", leaseRenew},
		{"RenewByNonOwnerOrStaleEpoch", leaseRenewNonOwner},
		{"RenewExpired", leaseRenewExpired},
		{"ReleaseByNonOwner", leaseReleaseNonOwner},
		{"EpochsOnlyGrow", leaseEpochsGrow},
		{"ConcurrentAcquirers", leaseConcurrent},
		{"LeasesAreIndependent", leaseIndependent},
		{"WatchSeesRelease", leaseWatch},
		{"ManyWatches", leaseManyWatches},
		{"Instances", leaseInstances},
		{"DoneContext", leaseDoneContext},
	})
}

const longTTL = time.Minute

func mustAcquire(t *testing.T, s store.LeaseStore, name, owner string, ttl time.Duration) store.Lease {
	t.Helper()
	l, err := s.Acquire(testCtx(t), name, owner, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, owner, err)
	}
	if l.Owner != owner || l.Name != name || l.Epoch < 1 {
		t.Fatalf("Acquire(%q, %q) = %+v: want that name and owner and an epoch ≥ 1", name, owner, l)
	}
	if !l.Held() || l.Remaining > ttl {
		t.Fatalf("Acquire(%q, %q): Remaining %v: want in (0, %v]", name, owner, l.Remaining, ttl)
	}
	return l
}

func mustGetLease(t *testing.T, s store.LeaseStore, name string) store.Lease {
	t.Helper()
	l, ok, err := s.GetLease(testCtx(t), name)
	if err != nil || !ok {
		t.Fatalf("GetLease(%q) = ok %v, %v", name, ok, err)
	}
	return l
}

// awaitExpired polls GetLease until the store judges the lease free.
func awaitExpired(t *testing.T, s store.LeaseStore, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, ok, err := s.GetLease(testCtx(t), name)
		if err != nil {
			t.Fatalf("GetLease(%q): %v", name, err)
		}
		if !ok || !l.Held() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %q still held after 10s: %+v", name, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leaseAcquireFree(t *testing.T, s store.LeaseStore) {
	if _, ok, err := s.GetLease(testCtx(t), "free"); err != nil || ok {
		t.Fatalf("GetLease of a lease never acquired = ok %v, %v; want not found", ok, err)
	}
	l := mustAcquire(t, s, "free", "a", longTTL)
	got := mustGetLease(t, s, "free")
	if got.Owner != "a" || got.Epoch != l.Epoch || !got.Held() {
		t.Fatalf("GetLease after Acquire = %+v, want owner a, epoch %d, held", got, l.Epoch)
	}
	if got.Remaining > longTTL || got.Remaining < longTTL-10*time.Second {
		t.Fatalf("GetLease: Remaining %v, want about %v", got.Remaining, longTTL)
	}
	if !got.ExpiresAt.After(got.AcquiredAt) {
		t.Fatalf("GetLease: ExpiresAt %v not after AcquiredAt %v", got.ExpiresAt, got.AcquiredAt)
	}
}

func leaseAcquireHeld(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "held", "a", longTTL)
	held, err := s.Acquire(testCtx(t), "held", "b", longTTL)
	if !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("Acquire of a held lease by another owner: %v, want ErrLeaseHeld", err)
	}
	if held.Owner != "a" || held.Epoch != l.Epoch || !held.Held() {
		t.Fatalf("Acquire of a held lease returned %+v, want the holder a at epoch %d", held, l.Epoch)
	}
	if got := mustGetLease(t, s, "held"); got.Owner != "a" || got.Epoch != l.Epoch {
		t.Fatalf("after a refused Acquire: %+v, want unchanged (a, epoch %d)", got, l.Epoch)
	}
}

func leaseAcquireExpired(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "expiring", "a", 300*time.Millisecond)
	awaitExpired(t, s, "expiring")
	l2 := mustAcquire(t, s, "expiring", "b", longTTL)
	if l2.Epoch <= l.Epoch {
		t.Fatalf("epoch after expiry and re-acquisition = %d, want > %d", l2.Epoch, l.Epoch)
	}
}

func leaseReleaseReacquire(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "released", "a", longTTL)
	if err := s.Release(testCtx(t), "released", "a", l.Epoch); err != nil {
		t.Fatalf("Release by the owner: %v", err)
	}
	got := mustGetLease(t, s, "released")
	if got.Held() || got.Epoch != l.Epoch {
		t.Fatalf("after Release: %+v, want free with epoch %d kept", got, l.Epoch)
	}
	l2 := mustAcquire(t, s, "released", "b", longTTL)
	if l2.Epoch <= l.Epoch {
		t.Fatalf("epoch after release and re-acquisition = %d, want > %d", l2.Epoch, l.Epoch)
	}
	if err := s.Release(testCtx(t), "released", "a", l.Epoch); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second Release by the former owner: %v, want ErrLeaseLost", err)
	}
}

func leaseReacquireOwn(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "own", "a", longTTL)
	l2 := mustAcquire(t, s, "own", "a", longTTL)
	if l2.Epoch <= l.Epoch {
		t.Fatalf("re-acquiring one's own lease: epoch %d, want > %d", l2.Epoch, l.Epoch)
	}
	if _, err := s.Renew(testCtx(t), "own", "a", l.Epoch, longTTL); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew under the superseded epoch: %v, want ErrLeaseLost", err)
	}
}

func leaseRenew(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "renew", "a", 2*time.Second)
	r, err := s.Renew(testCtx(t), "renew", "a", l.Epoch, longTTL)
	if err != nil {
		t.Fatalf("Renew by the owner: %v", err)
	}
	if r.Epoch != l.Epoch || r.Owner != "a" || r.Remaining <= 2*time.Second || !r.ExpiresAt.After(l.ExpiresAt) {
		t.Fatalf("Renew = %+v, want epoch %d kept and the expiry pushed to about %v", r, l.Epoch, longTTL)
	}
	if got := mustGetLease(t, s, "renew"); got.Remaining <= 2*time.Second {
		t.Fatalf("GetLease after Renew: Remaining %v, want about %v", got.Remaining, longTTL)
	}
}

func leaseRenewNonOwner(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "renew-other", "a", longTTL)
	if _, err := s.Renew(testCtx(t), "renew-other", "b", l.Epoch, longTTL); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew by a non-owner: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Renew(testCtx(t), "renew-other", "a", l.Epoch+1, longTTL); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew with another epoch: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Renew(testCtx(t), "never-acquired", "a", 1, longTTL); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew of a lease that does not exist: %v, want ErrLeaseLost", err)
	}
	if got := mustGetLease(t, s, "renew-other"); got.Owner != "a" || got.Epoch != l.Epoch {
		t.Fatalf("after refused renewals: %+v, want unchanged", got)
	}
}

func leaseRenewExpired(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "renew-expired", "a", 300*time.Millisecond)
	awaitExpired(t, s, "renew-expired")
	if _, err := s.Renew(testCtx(t), "renew-expired", "a", l.Epoch, longTTL); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew of an expired lease: %v, want ErrLeaseLost (another instance may hold it)", err)
	}
}

func leaseReleaseNonOwner(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "release-other", "a", longTTL)
	if err := s.Release(testCtx(t), "release-other", "b", l.Epoch); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Release by a non-owner: %v, want ErrLeaseLost", err)
	}
	if err := s.Release(testCtx(t), "release-other", "a", l.Epoch-1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Release with a stale epoch: %v, want ErrLeaseLost", err)
	}
	if got := mustGetLease(t, s, "release-other"); got.Owner != "a" || got.Epoch != l.Epoch || !got.Held() {
		t.Fatalf("after refused releases: %+v, want still held by a at epoch %d", got, l.Epoch)
	}
}

func leaseEpochsGrow(t *testing.T, s store.LeaseStore) {
	var last int64
	for i := range 10 {
		owner := fmt.Sprintf("owner-%d", i%3)
		l := mustAcquire(t, s, "grow", owner, longTTL)
		if l.Epoch <= last {
			t.Fatalf("acquisition %d: epoch %d, want > %d", i, l.Epoch, last)
		}
		last = l.Epoch
		if err := s.Release(testCtx(t), "grow", owner, l.Epoch); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
}

func leaseConcurrent(t *testing.T, s store.LeaseStore) {
	const acquirers = 5
	for trial := range trials {
		name := fmt.Sprintf("race-%d", trial)
		var wg sync.WaitGroup
		errs := make([]error, acquirers)
		leases := make([]store.Lease, acquirers)
		start := make(chan struct{})
		for i := range acquirers {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = s.Acquire(testCtx(t), name, fmt.Sprintf("contender-%d", i), longTTL)
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, err := range errs {
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, store.ErrLeaseHeld):
				t.Fatalf("trial %d, contender %d: %v, want nil or ErrLeaseHeld", trial, i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("trial %d: %d winners among %d concurrent acquirers, want exactly 1 (%v)", trial, winners, acquirers, errs)
		}
		got := mustGetLease(t, s, name)
		for i, err := range errs {
			if err == nil && (got.Owner != fmt.Sprintf("contender-%d", i) || got.Epoch != leases[i].Epoch) {
				t.Fatalf("trial %d: winner contender-%d (epoch %d), stored %+v", trial, i, leases[i].Epoch, got)
			}
		}
	}
}

func leaseIndependent(t *testing.T, s store.LeaseStore) {
	mustAcquire(t, s, "one", "a", longTTL)
	mustAcquire(t, s, "two", "b", longTTL)
	if got := mustGetLease(t, s, "one"); got.Owner != "a" {
		t.Fatalf("lease one: %+v, want owner a", got)
	}
}

func leaseWatch(t *testing.T, s store.LeaseStore) {
	l := mustAcquire(t, s, "watched", "a", longTTL)
	ctx, cancel := context.WithCancel(testCtx(t))
	ch := s.WatchLease(ctx, "watched")
	// The watch may need a moment to open: release, then re-acquire and release again until a
	// notification arrives, within a deadline.
	deadline := time.After(10 * time.Second)
	epoch, owner := l.Epoch, "a"
	if err := s.Release(testCtx(t), "watched", owner, epoch); err != nil {
		t.Fatalf("Release: %v", err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for notified := false; !notified; {
		select {
		case <-ch:
			notified = true
		case <-tick.C:
			l := mustAcquire(t, s, "watched", "b", longTTL)
			if err := s.Release(testCtx(t), "watched", "b", l.Epoch); err != nil {
				t.Fatalf("Release: %v", err)
			}
		case <-deadline:
			t.Fatal("no watch notification within 10s of releases")
		}
	}
	cancel()
	closeBy := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-closeBy:
			t.Fatal("the watch channel was not closed within 10s of its context's end")
		}
	}
}

func leaseInstances(t *testing.T, s store.LeaseStore) {
	ctx := testCtx(t)
	for _, id := range []string{"i-b", "i-a"} {
		if err := s.Heartbeat(ctx, id, longTTL); err != nil {
			t.Fatalf("Heartbeat(%q): %v", id, err)
		}
	}
	if err := s.Heartbeat(ctx, "i-short", 300*time.Millisecond); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	ids := func() []string {
		in, err := s.Instances(ctx)
		if err != nil {
			t.Fatalf("Instances: %v", err)
		}
		var out []string
		for _, i := range in {
			out = append(out, i.ID)
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for fmt.Sprint(ids()) != "[i-a i-b]" {
		if time.Now().After(deadline) {
			t.Fatalf("Instances = %v after the short heartbeat's expiry, want [i-a i-b]", ids())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Leave(ctx, "i-a"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if got := fmt.Sprint(ids()); got != "[i-b]" {
		t.Fatalf("Instances after Leave(i-a) = %s, want [i-b]", got)
	}
}

func leaseDoneContext(t *testing.T, s store.LeaseStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx, "done", "a", longTTL); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a done context: %v, want context.Canceled", err)
	}
	if _, err := s.Renew(ctx, "done", "a", 1, longTTL); !errors.Is(err, context.Canceled) {
		t.Fatalf("Renew with a done context: %v", err)
	}
	if err := s.Release(ctx, "done", "a", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Release with a done context: %v", err)
	}
	if _, _, err := s.GetLease(ctx, "done"); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetLease with a done context: %v", err)
	}
}
