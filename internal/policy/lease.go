package policy

import "time"

// Defaults of Lease: the zero value of a field means the default below.
const (
	// DefaultLeaseTTL is the default Lease.TTL.
	DefaultLeaseTTL = 60 * time.Second
	// DefaultRenewEvery is the default Lease.RenewEvery.
	DefaultRenewEvery = 15 * time.Second
	// DefaultStandbyPoll is the default Lease.StandbyPoll.
	DefaultStandbyPoll = 20 * time.Second
	// DefaultMarginDivisor gives the default Lease.Margin: TTL / DefaultMarginDivisor.
	DefaultMarginDivisor = 10
)

// Balance says whether the SingleLeader streams' leaderships are shared out over the instances.
type Balance uint8

const (
	// BalanceOn (the default, the zero value): each instance leads about its fair share,
	// ⌈M/N⌉ of the M streams over N live instances, and hands its excess over gracefully.
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

// Lease governs a SingleLeader stream's lease; the leader actor applies it. The root package
// calls it watchtree.LeasePolicy.
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
	// renew stops processing: it covers clock drift and the time to stop. Default TTL / 10
	// (6s with the default TTL). Must
	// be >= 0 (0 means the default) and < TTL.
	Margin time.Duration
	// Balance shares the leaderships out over the instances. Default BalanceOn.
	Balance Balance
}

// withDefaults returns p with every zero field replaced by its default.
func (p Lease) withDefaults() Lease {
	if p.TTL == 0 {
		p.TTL = DefaultLeaseTTL
	}
	if p.RenewEvery == 0 {
		p.RenewEvery = DefaultRenewEvery
	}
	if p.StandbyPoll == 0 {
		p.StandbyPoll = DefaultStandbyPoll
	}
	if p.Margin == 0 {
		p.Margin = p.TTL / DefaultMarginDivisor
	}
	return p
}

// Validate checks p. The error names the field and the rule ("LeasePolicy.RenewEvery must ...");
// it is a *ConfigError (several are joined) and matches ErrInvalidConfig.
func (p Lease) Validate() error {
	c := NewErrors("")
	p.validateInto(c, "LeasePolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>.
func (p Lease) validateInto(c *Errors, field string) {
	ok := true
	for _, f := range []struct {
		name string
		v, d time.Duration
	}{
		{"TTL", p.TTL, DefaultLeaseTTL},
		{"RenewEvery", p.RenewEvery, DefaultRenewEvery},
		{"StandbyPoll", p.StandbyPoll, DefaultStandbyPoll},
	} {
		if f.v < 0 {
			c.Add(field+"."+f.name, "must be > 0 (0 means the default %v), got %v", f.d, f.v)
			ok = false
		}
	}
	if p.Margin < 0 {
		c.Add(field+".Margin", "must be > 0 (0 means the default TTL / %d), got %v", DefaultMarginDivisor, p.Margin)
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
