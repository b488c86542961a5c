package watchtree

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

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
		Observer:  rt.obs,
		// Before the supervisor hears of the lease: every write of the term carries its epoch.
		OnAcquired: e.epoch.Store,
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
