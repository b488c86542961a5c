package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// TestMain checks for leaked goroutines. protoactor's dead-letter throttle (started when a
// message reaches an actor a test already stopped, such as a lease store's late answer) ends on
// its own one-second timer, not on anything the leader owns; under load it can outlive goleak's
// retries.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

const waitLimit = 10 * time.Second

// fakeStore is a lease store judged by its own "server clock": the fake clock's time as
// Advance moves it, from its start, so that a Jump of the actor's wall time (Now) does not move
// it. down makes every call fail; onRenew, when set, runs inside every Renew (a test's hook into
// the call in flight).
type fakeStore struct {
	clk   *clock.Fake
	start time.Time // the server clock at the fake's Mono 0

	mu      sync.Mutex
	lease   store.Lease
	down    bool
	renews  int
	watches []chan struct{}
	onRenew func()
}

// now is the server's clock.
func (s *fakeStore) now() time.Time { return s.start.Add(s.clk.Mono()) }

func (s *fakeStore) view() store.Lease {
	l := s.lease
	l.ServerNow = s.now()
	l.Remaining = 0
	if rem := l.ExpiresAt.Sub(l.ServerNow); l.Owner != "" && rem > 0 {
		l.Remaining = rem
	}
	return l
}

var errDown = errors.New("fake store down")

func (s *fakeStore) Acquire(_ context.Context, name, owner string, ttl time.Duration) (store.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return store.Lease{}, errDown
	}
	if v := s.view(); v.Held() && v.Owner != owner {
		return v, fmt.Errorf("held by %s: %w", v.Owner, store.ErrLeaseHeld)
	}
	now := s.now()
	s.lease = store.Lease{Name: name, Owner: owner, Epoch: s.lease.Epoch + 1, AcquiredAt: now, ExpiresAt: now.Add(ttl)}
	return s.view(), nil
}

func (s *fakeStore) Renew(_ context.Context, _, owner string, epoch int64, ttl time.Duration) (store.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return store.Lease{}, errDown
	}
	s.renews++
	if s.onRenew != nil {
		s.onRenew()
	}
	if v := s.view(); !v.Held() || v.Owner != owner || v.Epoch != epoch {
		return store.Lease{}, store.ErrLeaseLost
	}
	s.lease.ExpiresAt = s.now().Add(ttl)
	return s.view(), nil
}

func (s *fakeStore) Release(_ context.Context, _, owner string, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errDown
	}
	if s.lease.Owner != owner || s.lease.Epoch != epoch {
		return store.ErrLeaseLost
	}
	s.lease.Owner, s.lease.ExpiresAt = "", s.now()
	ws := append([]chan struct{}(nil), s.watches...)
	s.mu.Unlock()
	notify(ws) // as the real stores' feeds do: every watcher hears of a release, its own too
	s.mu.Lock()
	return nil
}

func (s *fakeStore) GetLease(_ context.Context, _ string) (store.Lease, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return store.Lease{}, false, errDown
	}
	return s.view(), s.lease.Name != "", nil
}

func notify(ws []chan struct{}) {
	for _, w := range ws {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (s *fakeStore) WatchLease(ctx context.Context, _ string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.watches = append(s.watches, ch)
	s.mu.Unlock()
	out := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				select {
				case out <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// set replaces the lease as another owner would, and notifies the watchers.
func (s *fakeStore) set(l store.Lease) {
	s.mu.Lock()
	s.lease = l
	ws := append([]chan struct{}(nil), s.watches...)
	s.mu.Unlock()
	notify(ws)
}

func (s *fakeStore) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

func (s *fakeStore) get() store.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// probe is the leader actor's parent: it forwards what the leader sends it.
type probe struct {
	props *actor.Props
	child chan *actor.PID
	got   chan proto.Message
}

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(p.props)
	case proto.Message:
		p.got <- m
	}
}

type harness struct {
	t      *testing.T
	clk    *clock.Fake
	st     *fakeStore
	sys    *actor.ActorSystem
	leader *actor.PID
	got    chan proto.Message
	events *recEvents
}

type recEvents struct {
	mu       sync.Mutex
	log      []string
	validity []time.Duration // every OnValidUntil
}

func (r *recEvents) validUntil(t time.Duration) {
	r.mu.Lock()
	r.validity = append(r.validity, t)
	r.mu.Unlock()
}

func (r *recEvents) validities() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.validity...)
}

// OnEvent records each LeadershipChanged as "<change> <epoch>", and the epoch OnAcquired got.
func (r *recEvents) OnEvent(e observe.Event) {
	ev, ok := e.(observe.LeadershipChanged)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || ev.Stream != "billing" || ev.Instance != "me" || ev.Leader != (ev.Change == observe.LeadershipAcquired) {
		r.log = append(r.log, fmt.Sprintf("unexpected %+v", e))
		return
	}
	r.log = append(r.log, fmt.Sprintf("%s %d", ev.Change, ev.Epoch))
}

func (r *recEvents) acquired(epoch int64) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("epoch %d", epoch))
	r.mu.Unlock()
}

func (r *recEvents) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

var testPolicy = policy.Lease{TTL: 10 * time.Second, RenewEvery: 2 * time.Second, StandbyPoll: 20 * time.Second, Margin: time.Second,
	Balance: policy.BalanceOff}

func newHarness(t *testing.T, prepare func(*fakeStore)) *harness {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := &fakeStore{clk: clk, start: clk.Now()}
	if prepare != nil {
		prepare(st)
	}
	ev := &recEvents{}
	props, err := New(Config{Stream: "billing", Owner: "me", Store: st, Policy: testPolicy, Clock: clk, Observer: ev,
		OnAcquired: ev.acquired, OnValidUntil: ev.validUntil})
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem()
	p := &probe{props: props, child: make(chan *actor.PID, 1), got: make(chan proto.Message, 64)}
	pp, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return p }), "sup")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clk: clk, st: st, sys: sys, leader: <-p.child, got: p.got, events: ev}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pp).Wait()
		sys.Shutdown()
	})
	return h
}

// next returns the next message of type M the leader sent its parent, skipping others.
func next[M proto.Message](h *harness) M {
	h.t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case m := <-h.got:
			if v, ok := m.(M); ok {
				return v
			}
		case <-deadline:
			var zero M
			h.t.Fatalf("no %T from the leader actor within %v", zero, waitLimit)
			return zero
		}
	}
}

// advance moves the fake clock once n timers are pending.
func (h *harness) advance(n int, d time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.clk.BlockUntil(ctx, n); err != nil {
		h.t.Fatalf("waiting for %d timers: %v (pending %d)", n, err, h.clk.Pending())
	}
	h.clk.Advance(d)
}

// A leader renews every RenewEvery; once the store fails it retries, and it demotes itself at
// exactly lastRenewOk + TTL - Margin, before the lease can expire in the store.
func TestLeaderRenewsAndDemotesBeforeExpiry(t *testing.T) {
	h := newHarness(t, nil)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	g := next[*wire.LeaseGranted](h)
	if g.GetEpoch() != 1 || g.GetOwner() != "me" {
		t.Fatalf("LeaseGranted %v, want epoch 1 owner me", g)
	}
	acquiredAt := h.clk.Now()
	// renew and demote timers
	h.advance(2, testPolicy.RenewEvery)
	deadline := time.Now().Add(waitLimit)
	for h.get().ExpiresAt != acquiredAt.Add(testPolicy.RenewEvery+testPolicy.TTL) {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal: lease %+v", h.get())
		}
		time.Sleep(time.Millisecond) // polling tick
	}
	lastOk := acquiredAt.Add(testPolicy.RenewEvery)
	h.st.setDown(true)
	// Advance in renew-retry steps until the demotion fires.
	for h.clk.Now().Before(lastOk.Add(testPolicy.TTL - testPolicy.Margin)) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		_ = h.clk.BlockUntil(ctx, 2)
		cancel()
		d, _ := h.clk.NextDeadline()
		h.clk.Advance(d)
	}
	lost := next[*wire.LeaseLost](h)
	if lost.GetEpoch() != 1 {
		t.Fatalf("LeaseLost %v, want epoch 1", lost)
	}
	if got, want := h.clk.Now(), lastOk.Add(testPolicy.TTL-testPolicy.Margin); !got.Equal(want) {
		t.Fatalf("demoted at %v, want lastRenewOk + TTL - Margin = %v", got, want)
	}
	if exp := h.st.get().ExpiresAt; !h.clk.Now().Before(exp) {
		t.Fatalf("demoted at %v, not before the store's expiry %v", h.clk.Now(), exp)
	}
	if ev := h.events.all(); len(ev) != 3 || ev[0] != "epoch 1" || ev[1] != "acquired 1" || ev[2] != "lost 1" {
		t.Fatalf("events %v", ev)
	}
}

func (h *harness) get() store.Lease { return h.st.get() }

// A standby retries exactly when the lease it saw expires, long before its next poll.
func TestStandbyRetriesAtExpiry(t *testing.T) {
	h := newHarness(t, func(s *fakeStore) {
		now := s.clk.Now()
		s.lease = store.Lease{Name: "billing", Owner: "other", Epoch: 4, AcquiredAt: now, ExpiresAt: now.Add(5 * time.Second)}
	})
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	st := next[*messages.LeaseState](h)
	for st.GetHolder() != "other" {
		st = next[*messages.LeaseState](h)
	}
	if st.GetRole() != messages.LeaseRole_LEASE_ROLE_STANDBY || st.GetEpoch() != 4 {
		t.Fatalf("LeaseState %v, want standby behind other's epoch 4", st)
	}
	h.advance(2, 5*time.Second-time.Millisecond) // poll + expiry timers
	select {
	case m := <-h.got:
		if _, ok := m.(*wire.LeaseGranted); ok {
			t.Fatal("granted before the lease expired")
		}
	default:
	}
	h.clk.Advance(2 * time.Millisecond)
	g := next[*wire.LeaseGranted](h)
	if g.GetEpoch() != 5 {
		t.Fatalf("LeaseGranted epoch %d, want 5", g.GetEpoch())
	}
	if got := h.clk.Now().Sub(st.GetExpiresAt().AsTime()); got > 2*time.Millisecond {
		t.Fatalf("acquired %v after the expiry", got)
	}
}

// A release seen through the watch is acted on at once, without waiting for a timer.
func TestStandbyActsOnWatch(t *testing.T) {
	h := newHarness(t, func(s *fakeStore) {
		now := s.clk.Now()
		s.lease = store.Lease{Name: "billing", Owner: "other", Epoch: 2, AcquiredAt: now, ExpiresAt: now.Add(time.Minute)}
	})
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	for next[*messages.LeaseState](h).GetHolder() != "other" {
	}
	h.advance(2, 0) // both standby timers armed: the first attempt's answer is in
	h.st.set(store.Lease{Name: "billing", Epoch: 2, ExpiresAt: h.clk.Now()})
	g := next[*wire.LeaseGranted](h)
	if g.GetEpoch() != 3 {
		t.Fatalf("LeaseGranted epoch %d, want 3", g.GetEpoch())
	}
}

// Resign releases the lease and answers once the release is written; the actor goes idle.
func TestResignReleases(t *testing.T) {
	h := newHarness(t, nil)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	next[*wire.LeaseGranted](h)
	res, err := h.sys.Root.RequestFuture(h.leader, &wire.Resign{Reason: "stop"}, waitLimit).Result()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(*wire.Resigned)
	if !ok || !r.GetReleased() || r.GetEpoch() != 1 {
		t.Fatalf("Resign answered %v, want released epoch 1", res)
	}
	if l := h.st.get(); l.Owner != "" {
		t.Fatalf("lease after Resign: %+v, want released", l)
	}
	for st := next[*messages.LeaseState](h); st.GetRole() != messages.LeaseRole_LEASE_ROLE_IDLE; st = next[*messages.LeaseState](h) {
	}
	if ev := h.events.all(); len(ev) != 3 || ev[0] != "epoch 1" || ev[2] != "released 1" {
		t.Fatalf("events %v", ev)
	}
}

// A refused renewal (another owner holds the lease) demotes at once.
func TestRefusedRenewalDemotesAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	next[*wire.LeaseGranted](h)
	now := h.clk.Now()
	h.st.mu.Lock()
	h.st.lease = store.Lease{Name: "billing", Owner: "thief", Epoch: 9, AcquiredAt: now, ExpiresAt: now.Add(time.Minute)}
	h.st.mu.Unlock()
	h.advance(2, testPolicy.RenewEvery)
	lost := next[*wire.LeaseLost](h)
	if lost.GetEpoch() != 1 || h.clk.Now().Sub(now) != testPolicy.RenewEvery {
		t.Fatalf("LeaseLost %v at +%v, want epoch 1 at the renewal", lost, h.clk.Now().Sub(now))
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Policy: policy.Lease{RenewEvery: -1}}.validate()
	for _, want := range []string{"Config.Stream", "Config.Owner", "Config.Store", "Config.Policy.RenewEvery"} {
		if err == nil || !containsStr(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A Campaign that arrives while a release is under way (a stop, then at once a start) is
// honoured once the release is written: the actor campaigns again instead of going idle.
func TestCampaignDuringReleaseCampaignsAfterIt(t *testing.T) {
	h := newHarness(t, nil)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	next[*wire.LeaseGranted](h)
	fut := h.sys.Root.RequestFuture(h.leader, &wire.Resign{Reason: "stop"}, waitLimit)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "start again"})
	res, err := fut.Result()
	if err != nil || !res.(*wire.Resigned).GetReleased() {
		t.Fatalf("Resign: %v, %v", res, err)
	}
	if g := next[*wire.LeaseGranted](h); g.GetEpoch() != 2 {
		t.Fatalf("LeaseGranted epoch %d after the release, want 2", g.GetEpoch())
	}
}

// The LeaseState a leader reports carries the expiry of its latest renewal, not the one of its
// acquisition: describe, the JSON and Status().Lease show it, and a healthy leader must not look
// expired there.
func TestLeaseStateFollowsRenewals(t *testing.T) {
	h := newHarness(t, nil)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	acquiredAt := h.clk.Now()
	for st := next[*messages.LeaseState](h); st.GetRole() != messages.LeaseRole_LEASE_ROLE_LEADER; st = next[*messages.LeaseState](h) {
	}
	for i := 1; i <= 3; i++ {
		h.advance(2, testPolicy.RenewEvery) // renew and demote timers
		want := acquiredAt.Add(time.Duration(i)*testPolicy.RenewEvery + testPolicy.TTL)
		st := next[*messages.LeaseState](h)
		if got := st.GetExpiresAt().AsTime(); !got.Equal(want) || st.GetRole() != messages.LeaseRole_LEASE_ROLE_LEADER {
			t.Fatalf("after renewal %d: LeaseState %v expires %v, want leader expiring %v", i, st, got, want)
		}
	}
}

// OnValidUntil follows the term on the clock's monotonic reading: lastRenewOk + TTL - Margin
// at the acquisition and after each renewal (the demotion deadline), and 0 once the lease is
// lost, so that the dispatcher starts no handler call after it even when the actor's timers
// are late.
func TestValidUntilFollowsTheTerm(t *testing.T) {
	h := newHarness(t, nil)
	h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
	next[*wire.LeaseGranted](h)
	acquiredAt := h.clk.Mono()
	window := testPolicy.TTL - testPolicy.Margin
	if v := h.events.validities(); len(v) != 1 || v[0] != acquiredAt+window {
		t.Fatalf("validity after the acquisition %v, want [%v]", v, acquiredAt+window)
	}
	h.advance(2, testPolicy.RenewEvery)
	h.waitValidities(2)
	if v := h.events.validities()[1]; v != acquiredAt+testPolicy.RenewEvery+window {
		t.Fatalf("validity after the renewal %v, want %v", v, acquiredAt+testPolicy.RenewEvery+window)
	}
	h.st.set(store.Lease{Name: "billing", Owner: "other", Epoch: 9, ExpiresAt: h.st.now().Add(time.Hour)})
	h.advance(2, testPolicy.RenewEvery)
	next[*wire.LeaseLost](h)
	v := h.events.validities()
	if last := v[len(v)-1]; last != 0 {
		t.Fatalf("validity after the loss %v, want 0 (not leading)", last)
	}
}

// waitValidities polls until the leader has reported n validities.
func (h *harness) waitValidities(n int) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for len(h.events.validities()) < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d validities reported, want %d", len(h.events.validities()), n)
		}
		time.Sleep(time.Millisecond) // polling tick
	}
}

// The wall time (Now) jumping by an hour while a renewal is in flight moves neither the term
// nor the demotion: the leader measures both from the renewal's sending on the monotonic
// reading. Measured on Now, a backward jump kept the leader (and its handler calls) an hour
// past its lease, and a forward jump demoted it at once.
func TestWallClockJumpMovesNoDeadline(t *testing.T) {
	for _, jump := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(fmt.Sprint(jump), func(t *testing.T) {
			h := newHarness(t, nil)
			h.sys.Root.Send(h.leader, &wire.Campaign{Reason: "test"})
			next[*wire.LeaseGranted](h)
			h.st.mu.Lock()
			h.st.onRenew = func() { h.clk.Jump(jump); h.st.onRenew = nil } // the first renewal only
			h.st.mu.Unlock()
			h.advance(2, testPolicy.RenewEvery) // renew (sent at Mono 2s; the wall jumps meanwhile)
			h.waitValidities(2)
			window := testPolicy.TTL - testPolicy.Margin
			if v := h.events.validities()[1]; v != testPolicy.RenewEvery+window {
				t.Fatalf("validity after the renewal %v, want %v (Mono)", v, testPolicy.RenewEvery+window)
			}
			// The next renewal is due RenewEvery after the last, the demotion TTL - Margin
			// after it: both timers at their monotonic deadlines, however the wall moved.
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := h.clk.BlockUntil(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if d, _ := h.clk.NextDeadline(); d != testPolicy.RenewEvery {
				t.Fatalf("next timer in %v, want the renewal in %v", d, testPolicy.RenewEvery)
			}
			h.st.setDown(true)
			lastOk := testPolicy.RenewEvery
			for h.clk.Mono() < lastOk+window {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				_ = h.clk.BlockUntil(ctx, 2)
				cancel()
				d, _ := h.clk.NextDeadline()
				h.clk.Advance(d)
			}
			next[*wire.LeaseLost](h)
			if got := h.clk.Mono(); got != lastOk+window {
				t.Fatalf("demoted at Mono %v, want lastRenewOk + TTL - Margin = %v", got, lastOk+window)
			}
			if exp := h.st.get().ExpiresAt; !h.st.now().Before(exp) {
				t.Fatalf("demoted at server time %v, not before the store's expiry %v", h.st.now(), exp)
			}
		})
	}
}
