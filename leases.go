package watchtree

import (
	"github.com/watchtree/watchtree/policy"
)

// LeasePolicy (Config.Lease) governs the leases of the runtime's SingleLeader streams; the
// leader actor of each applies it. The zero value is the default policy: a 60s lease renewed
// every 15s, standbys polling every 20s, leaderships balanced. It is package policy's Lease,
// where its fields (units, defaults, bounds), the timing rules and Validate are documented.
//
// Its fields, each documented on policy.Lease:
//   - TTL time.Duration: how long an acquisition or renewal holds the lease (default 60s)
//   - RenewEvery time.Duration: the leader's renewal period, and the heartbeat's (default 15s)
//   - StandbyPoll time.Duration: the period of a standby's attempts (default 20s)
//   - Margin time.Duration: how long before the lease can expire a leader that could not renew
//     stops (default TTL / 10)
//   - Balance Balance: shares the leaderships out over the instances (default BalanceOn)
type LeasePolicy = policy.Lease

// Balance is LeasePolicy.Balance: whether the SingleLeader streams' leaderships are shared out
// over the instances. It is package policy's Balance, where its values are documented.
type Balance = policy.Balance

// The Balance values (see policy.BalanceOn and policy.BalanceOff).
const (
	// BalanceOn (the default): each instance leads at most its fair share of the SingleLeader
	// streams.
	BalanceOn = policy.BalanceOn
	// BalanceOff: whoever acquires a lease first keeps it.
	BalanceOff = policy.BalanceOff
)
