package watchtree

import (
	"github.com/watchtree/watchtree/internal/policy"
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
