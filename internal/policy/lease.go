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

// Balance is watchtree.Balance in the form the leader actor takes (its values are the same).
type Balance uint8

// The values of watchtree.BalanceOn and watchtree.BalanceOff.
const (
	BalanceOn Balance = iota
	BalanceOff
)

// String returns "on" or "off".
func (b Balance) String() string {
	if b == BalanceOff {
		return "off"
	}
	return "on"
}

// Lease is the field list of watchtree.LeasePolicy, which documents the fields, their defaults
// and the timing rules; the leader actor applies it.
type Lease struct {
	TTL         time.Duration
	RenewEvery  time.Duration
	StandbyPoll time.Duration
	Margin      time.Duration
	Balance     Balance
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
// it is a *configerr.Error (several are joined) and matches configerr.ErrInvalid.
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
