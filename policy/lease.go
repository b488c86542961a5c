package policy

import (
	"cmp"
	"github.com/watchtree/watchtree/internal/configcheck"
	"time"
)

// Defaults of Lease: the zero value of a field means the default below.
const (
	// defaultLeaseTTL is the default Lease.TTL.
	defaultLeaseTTL = 60 * time.Second
	// defaultRenewEvery is the default Lease.RenewEvery.
	defaultRenewEvery = 15 * time.Second
	// defaultStandbyPoll is the default Lease.StandbyPoll.
	defaultStandbyPoll = 20 * time.Second
	// defaultMarginDivisor gives the default Lease.Margin: TTL / defaultMarginDivisor.
	defaultMarginDivisor = 10
)

// Balance is Lease.Balance (watchtree.Balance): whether the SingleLeader streams' leaderships are shared out
// over the instances.
type Balance uint8

// The Balance values.
const (
	// BalanceOn (the default, the zero value): each instance leads at most its fair share ⌈M/N⌉
	// of the M SingleLeader streams over the N live instances (transiently one more), handing
	// its excess over gracefully.
	BalanceOn Balance = iota
	// BalanceOff: whoever acquires a lease first keeps it until it stops or loses it.
	BalanceOff
)

// String returns "on" or "off".
func (b Balance) String() string {
	if b == BalanceOff {
		return "off"
	}
	return "on"
}

// Lease (watchtree.LeasePolicy, Config.Lease; leader.Config.Policy) governs the leases of the
// runtime's SingleLeader streams; the leader actor of each applies it. The zero value is the
// default policy.
//
// The leader acquires the lease for TTL and renews it every RenewEvery. Expiry is judged by the
// lease store's clock (MongoDB's $$NOW, Redis's key TTL). A leader whose renewal fails or is late
// stops processing at lastRenewOk + TTL - Margin by its own clock, where lastRenewOk is the time it
// sent the latest successful renewal, so it has stopped before the store can give the lease to
// anyone else. A standby tries to acquire every StandbyPoll, at the exact moment the lease it saw
// expires, and at once when the lease store reports a change (a release), so a graceful handover
// takes well under a second and a crash failover about TTL.
type Lease struct {
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

// withDefaults returns p with every zero field replaced by its default.
func (p Lease) withDefaults() Lease {
	p.TTL = cmp.Or(p.TTL, defaultLeaseTTL)
	p.RenewEvery = cmp.Or(p.RenewEvery, defaultRenewEvery)
	p.StandbyPoll = cmp.Or(p.StandbyPoll, defaultStandbyPoll)
	p.Margin = cmp.Or(p.Margin, p.TTL/defaultMarginDivisor)
	return p
}

// Validate checks p. The error names the field and the rule ("LeasePolicy.RenewEvery must ...");
// it is a *configerr.Error (several are joined) and matches configerr.ErrInvalid.
func (p Lease) Validate() error {
	return validate(p, "LeasePolicy")
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>.
func (p Lease) validateInto(c *configcheck.Errors, field string) {
	ok := true
	for _, f := range []struct {
		name string
		v, d time.Duration
	}{
		{"TTL", p.TTL, defaultLeaseTTL},
		{"RenewEvery", p.RenewEvery, defaultRenewEvery},
		{"StandbyPoll", p.StandbyPoll, defaultStandbyPoll},
	} {
		if f.v < 0 {
			c.Add(field+"."+f.name, "must be > 0 (0 means the default %v), got %v", f.d, f.v)
			ok = false
		}
	}
	if p.Margin < 0 {
		c.Add(field+".Margin", "must be > 0 (0 means the default TTL / %d), got %v", defaultMarginDivisor, p.Margin)
		ok = false
	}
	if p.Balance > BalanceOff {
		c.Add(field+".Balance", "must be BalanceOn or BalanceOff, got %d", p.Balance)
	}
	if !ok {
		return
	}
	d := p.withDefaults()
	if d.Margin >= d.TTL {
		c.Add(field+".Margin", "must be < TTL (%v), got %v", d.TTL, d.Margin)
		return
	}
	if 2*d.RenewEvery > d.TTL-d.Margin {
		c.Add(field+".RenewEvery", "must leave room for two renewals before the leader stops: 2 × RenewEvery <= TTL - Margin (%v - %v), got %v",
			d.TTL, d.Margin, d.RenewEvery)
	}
}
