package watchtree

import (
	"github.com/watchtree/watchtree/internal/policy"
)

// LeasePolicy is the leases of SingleLeader streams, Config.Lease (internal/policy.Lease).
type LeasePolicy = policy.Lease

// Balance is LeasePolicy.Balance: BalanceOn or BalanceOff (internal/policy.Balance).
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
