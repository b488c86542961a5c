package watchtree

import (
	"time"

	"github.com/watchtree/watchtree/policy"
)

// LeasePolicy (Config.Lease) governs the leases of the runtime's SingleLeader streams; the
// leader actor of each applies it. The zero value is the default policy.
//
// The leader acquires the lease for TTL and renews it every RenewEvery. Expiry is judged by the
// lease store's clock (MongoDB's $$NOW, Redis's key TTL). A leader whose renewal fails or is late
// stops processing at lastRenewOk + TTL - Margin by its own clock, where lastRenewOk is the time it
// sent the latest successful renewal, so it has stopped before the store can give the lease to
// anyone else. A standby tries to acquire every StandbyPoll, at the exact moment the lease it saw
// expires, and at once when the lease store reports a change (a release), so a graceful handover
// takes well under a second and a crash failover about TTL.
type LeasePolicy struct {
	// TTL is how long an acquisition or renewal holds the lease. Default 60s. Must be >= 0 (0
	// means the default) and leave room for two renewals: 2 × RenewEvery <= TTL - Margin.
	TTL time.Duration
	// RenewEvery is the renewal period of the leader (and of the instance heartbeat used by
	// Balance). Default 15s. Must be >= 0 (0 means the default).
	RenewEvery time.Duration
	// StandbyPoll is the period of a standby's acquisition attempts. Default 20s. Must be >= 0 (0
	// means the default).
	StandbyPoll time.Duration
	// Margin is how long before the lease can expire on the server a leader that could not
	// renew stops processing: it covers clock drift and the time to stop. Default TTL / 10 (6s
	// with the default TTL). Must be >= 0 (0 means the default) and < TTL.
	Margin time.Duration
	// Balance shares the leaderships out over the instances. Default BalanceOn.
	Balance Balance
}

// Validate checks p. The error names the field and the rule ("LeasePolicy.RenewEvery must ...");
// it is a *ConfigError (several are joined) and matches ErrInvalidConfig.
func (p LeasePolicy) Validate() error { return p.internal().Validate() }

// internal is p in the form the leader actor and the balancer take. It converts field by field,
// because Balance is a root type; TestPolicyConversionsKeepEveryField fails when a field is added
// to one side only.
func (p LeasePolicy) internal() policy.Lease {
	return policy.Lease{TTL: p.TTL, RenewEvery: p.RenewEvery, StandbyPoll: p.StandbyPoll, Margin: p.Margin,
		Balance: policy.Balance(p.Balance)}
}

// Balance is LeasePolicy.Balance: whether the SingleLeader streams' leaderships are shared out
// over the instances.
type Balance uint8

// The Balance values.
const (
	// BalanceOn (the default, the zero value): each instance leads at most its fair share ⌈M/N⌉
	// of the M SingleLeader streams over the N live instances (transiently one more), handing
	// its excess over gracefully.
	BalanceOn Balance = Balance(policy.BalanceOn)
	// BalanceOff: whoever acquires a lease first keeps it until it stops or loses it.
	BalanceOff Balance = Balance(policy.BalanceOff)
)

// String returns "on" or "off".
func (b Balance) String() string { return policy.Balance(b).String() }
