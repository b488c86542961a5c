package watchtree

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/leader"
	"github.com/watchtree/watchtree/internal/engine"
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
func (rt *Runtime) balancerFor(leases store.LeaseStore, stream string) *engine.Balancer {
	rt.mu.Lock()
	if rt.bal == nil {
		rt.bal = engine.NewBalancer(leases, rt.cfg.Lease, rt.cfg.InstanceID, rt.cfg.ConnectTimeout, rt.log)
	}
	b := rt.bal
	rt.mu.Unlock()
	b.Add(stream)
	return b
}

// epochHolder is the fencing epoch of a SingleLeader stream's current term (0 otherwise).
type epochHolder = atomic.Int64
