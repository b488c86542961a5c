package watchtree

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/leader"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// LeasePolicy governs the leases of SingleLeader streams (Config.Lease): TTL 60s, renewal every
// 15s, standby attempts every 20s, a leader that cannot renew stops at lastRenewOk + TTL -
// Margin (Margin default TTL/10), and balanced leadership on. See policy.Lease.
type LeasePolicy = policy.Lease

// Balance says whether leaderships are shared out over the instances (LeasePolicy.Balance).
type Balance = policy.Balance

// The Balance values.
const (
	// BalanceOn (the default): each instance leads at most its fair share ⌈M/N⌉ of the M
	// SingleLeader streams over the N live instances (transiently one more), handing its excess
	// over gracefully.
	BalanceOn = policy.BalanceOn
	// BalanceOff: a leader keeps its leases until it stops or loses them.
	BalanceOff = policy.BalanceOff
)

// LeadershipChange says what happened to a SingleLeader stream's leadership on this instance.
type LeadershipChange string

// The leadership changes reported by LeadershipChanged.
const (
	// LeadershipAcquired: this instance acquired the lease and starts the stream.
	LeadershipAcquired LeadershipChange = "acquired"
	// LeadershipLost: a renewal was refused or late; the stream stopped at once.
	LeadershipLost LeadershipChange = "lost"
	// LeadershipReleased: the lease was released by a graceful stop.
	LeadershipReleased LeadershipChange = "released"
	// LeadershipHandedOver: the lease was released for balance, after a graceful stop.
	LeadershipHandedOver LeadershipChange = "handed-over"
	// LeadershipFenced: a checkpoint or dead-letter write was refused by a newer epoch; the
	// stream stopped at once.
	LeadershipFenced LeadershipChange = "fenced"
)

// leaderEvents maps the leader actor's reports to Observer events and keeps the stream's fencing
// epoch, on the leader actor's goroutine.
type leaderEvents struct{ e *streamEntry }

func (l leaderEvents) emit(change LeadershipChange, ev leader.LeaseEvent) {
	owner := ev.Holder
	if change == LeadershipAcquired {
		owner = ev.Owner
	}
	l.e.rt.obs.OnEvent(LeadershipChanged{Meta: Meta{Stream: l.e.name, Time: l.e.rt.clk.Now()},
		Leader: change == LeadershipAcquired, Change: change, Instance: ev.Owner, Owner: owner, Epoch: ev.Epoch,
		ExpiresAt: ev.ExpiresAt, Why: ev.Why})
}

func (l leaderEvents) Acquired(ev leader.LeaseEvent) {
	l.e.epoch.Store(ev.Epoch) // before the supervisor hears of it: every write of the term carries it
	l.e.log.Info("leadership acquired", zap.Int64("epoch", ev.Epoch), zap.Time("expires_at", ev.ExpiresAt))
	l.emit(LeadershipAcquired, ev)
}
func (l leaderEvents) Lost(ev leader.LeaseEvent) {
	l.e.log.Warn("leadership lost", zap.Int64("epoch", ev.Epoch), zap.String("why", ev.Why))
	l.emit(LeadershipLost, ev)
}
func (l leaderEvents) Released(ev leader.LeaseEvent) {
	l.e.log.Info("lease released", zap.Int64("epoch", ev.Epoch))
	l.emit(LeadershipReleased, ev)
}
func (l leaderEvents) HandedOver(ev leader.LeaseEvent) {
	l.e.log.Info("lease handed over for balance", zap.Int64("epoch", ev.Epoch))
	l.emit(LeadershipHandedOver, ev)
}
func (l leaderEvents) Fenced(ev leader.LeaseEvent) {
	l.e.log.Error("write fenced by a newer epoch", zap.Int64("epoch", ev.Epoch), zap.String("why", ev.Why))
	l.emit(LeadershipFenced, ev)
}

// fencedDeadLetters guards a SingleLeader stream's dead-letter writes: a write goes through only
// while this instance holds the lease under the stream's current epoch, as the lease store
// judges it right before the write; otherwise it fails with store.ErrFenced (the event stays
// unsettled, so nothing is lost) and the supervisor is told, which stops the stream at once.
type fencedDeadLetters struct {
	store.DeadLetterStore
	e      *streamEntry
	leases store.LeaseStore
}

func (f fencedDeadLetters) PutDeadLetter(ctx context.Context, dl store.DeadLetter) error {
	epoch := f.e.epoch.Load()
	l, ok, err := f.leases.GetLease(ctx, f.e.name)
	if err != nil {
		return fmt.Errorf("watchtree: dead letter of stream %q: check the lease: %w", f.e.name, err)
	}
	if !ok || !l.Held() || l.Owner != f.e.rt.cfg.InstanceID || l.Epoch != epoch {
		why := fmt.Sprintf("dead-letter write under epoch %d refused: the lease is held by %q under epoch %d", epoch, l.Owner, l.Epoch)
		if pid, root := f.e.supervisorPID(), f.e.rt.sysRoot(); pid != nil && root != nil {
			root.Send(pid, &wire.Fenced{Epoch: epoch, Why: why})
		}
		return fmt.Errorf("watchtree: stream %q: %s: %w", f.e.name, why, store.ErrFenced)
	}
	return f.DeadLetterStore.PutDeadLetter(ctx, dl)
}

// balancer shares the runtime's SingleLeader leaderships out over the live instances: it keeps
// this instance's heartbeat in the lease store (every RenewEvery, for TTL) and counts the live
// instances; the leader actors ask it before they take a free lease and after each renewal.
type balancer struct {
	rt     *Runtime
	leases store.LeaseStore
	policy LeasePolicy

	mu        sync.Mutex
	streams   map[string]bool // the runtime's SingleLeader streams → led by this instance
	handing   map[string]bool // led streams being handed over
	instances int             // live instances, this one included (≥ 1)

	cancel context.CancelFunc
	done   chan struct{}
}

func newBalancer(rt *Runtime, leases store.LeaseStore) *balancer {
	ctx, cancel := context.WithCancel(context.Background())
	b := &balancer{rt: rt, leases: leases, policy: rt.cfg.Lease.WithDefaults(), streams: map[string]bool{},
		handing: map[string]bool{}, instances: 1, cancel: cancel, done: make(chan struct{})}
	go b.run(ctx)
	return b
}

// run beats and counts the instances every RenewEvery until stop.
func (b *balancer) run(ctx context.Context) {
	defer close(b.done)
	id := b.rt.cfg.InstanceID
	for {
		cctx, cancel := context.WithTimeout(ctx, min(b.rt.cfg.ConnectTimeout, b.policy.RenewEvery))
		err := b.leases.Heartbeat(cctx, id, b.policy.TTL)
		var in []store.Instance
		if err == nil {
			in, err = b.leases.Instances(cctx)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			b.rt.log.Warn("instance heartbeat failed", zap.Error(err))
		} else {
			n := len(in)
			found := false
			for _, i := range in {
				found = found || i.ID == id
			}
			if !found {
				n++
			}
			b.mu.Lock()
			b.instances = max(n, 1)
			b.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(b.policy.RenewEvery):
			continue
		}
		break
	}
	lctx, cancel := context.WithTimeout(context.Background(), min(b.rt.cfg.ConnectTimeout, time.Second))
	defer cancel()
	_ = b.leases.Leave(lctx, id)
}

func (b *balancer) stop() {
	b.cancel()
	<-b.done
}

func (b *balancer) add(stream string) {
	b.mu.Lock()
	b.streams[stream] = false
	b.mu.Unlock()
}

func (b *balancer) remove(stream string) {
	b.mu.Lock()
	delete(b.streams, stream)
	delete(b.handing, stream)
	b.mu.Unlock()
}

// share is ⌈M/N⌉, under b.mu.
func (b *balancer) share() (leading, share int) {
	for _, l := range b.streams {
		if l {
			leading++
		}
	}
	m := len(b.streams)
	return leading, (m + b.instances - 1) / b.instances
}

func (b *balancer) MayAcquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	leading, share := b.share()
	return leading < share
}

func (b *balancer) Leading(stream string, leading bool) {
	b.mu.Lock()
	if _, ok := b.streams[stream]; ok {
		b.streams[stream] = leading
	}
	if !leading {
		delete(b.handing, stream)
	}
	b.mu.Unlock()
}

func (b *balancer) ShouldHandOver(stream string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	leading, share := b.share()
	if b.handing[stream] || leading-len(b.handing) <= share {
		return false
	}
	b.handing[stream] = true
	return true
}

// leaderProps builds the leader actor of a SingleLeader stream.
func (e *streamEntry) leaderProps(leases store.LeaseStore) (*actor.Props, error) {
	rt := e.rt
	var bal leader.Balancer
	if rt.cfg.Lease.Balance == BalanceOn {
		bal = rt.balancerFor(leases, e.name)
	}
	return leader.New(leader.Config{
		Stream:    e.name,
		Owner:     rt.cfg.InstanceID,
		Store:     leases,
		Policy:    rt.cfg.Lease,
		Balancer:  bal,
		IOTimeout: rt.cfg.ConnectTimeout,
		Clock:     rt.clk,
		Logger:    rt.log,
		Events:    leaderEvents{e},
	})
}

// balancerFor returns the runtime's balancer (started with the first SingleLeader stream) with
// stream counted in it.
func (rt *Runtime) balancerFor(leases store.LeaseStore, stream string) *balancer {
	rt.mu.Lock()
	if rt.bal == nil {
		rt.bal = newBalancer(rt, leases)
	}
	b := rt.bal
	rt.mu.Unlock()
	b.add(stream)
	return b
}

// epochHolder is the fencing epoch of a SingleLeader stream's current term (0 otherwise).
type epochHolder = atomic.Int64
