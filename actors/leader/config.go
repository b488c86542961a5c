package leader

import (
	"context"
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// Store is the part of store.LeaseStore the leader actor calls (see there for the guarantees
// and errors); expiry is the store's to judge.
type Store interface {
	// Acquire: see store.LeaseStore.Acquire.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (store.Lease, error)
	// Renew: see store.LeaseStore.Renew.
	Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (store.Lease, error)
	// Release: see store.LeaseStore.Release.
	Release(ctx context.Context, name, owner string, epoch int64) error
	// GetLease: see store.LeaseStore.GetLease. Read during a release window only, to tell
	// whether another instance took the lease.
	GetLease(ctx context.Context, name string) (store.Lease, bool, error)
	// WatchLease: see store.LeaseStore.WatchLease.
	WatchLease(ctx context.Context, name string) <-chan struct{}
}

// The lease store satisfies the subset.
var _ Store = store.LeaseStore(nil)

// Balancer shares the leaderships of one instance's SingleLeader streams out over the live
// instances (LeasePolicy.Balance). The root implements it once per runtime; every leader actor
// of the runtime calls it from its own goroutine, so it must be safe for concurrent use and must
// not block.
type Balancer interface {
	// MayAcquire reports whether this instance leads fewer than its fair share of streams; an
	// instance at or above it waits one renew period before it takes a free lease, so that
	// instances below their share take it first.
	MayAcquire() bool
	// Leading records that this instance now leads (or no longer leads) stream.
	Leading(stream string, leading bool)
	// ShouldHandOver reports whether this instance leads more than its fair share and stream
	// should be handed over now; it allows one handover at a time per instance.
	ShouldHandOver(stream string) bool
}

// DefaultConfig returns the defaults of every Config field that has a value default: the one
// source of them. New fills each zero field of the Config it is given from it (a partly set
// Policy field by field, from the same policy defaults), and the runtime builds its leader
// actors from it, so that no other layer holds a default of its own that could silently
// override this one (TestActorDefaults checks that New's filling equals DefaultConfig). New
// also caps IOTimeout at Policy.TTL. The dependencies (Clock, Logger, Observer) are not
// values: nil means the real clock, no log and no events.
func DefaultConfig() Config {
	return Config{
		Policy:    policyx.WithDefaults(policy.Lease{}),
		IOTimeout: treekit.DefaultIOTimeout,
	}
}

// Config configures one stream's leader actor. Stream, Owner and Store are required.
type Config struct {
	// Stream is the stream name, the lease's name.
	Stream string
	// Owner is this instance's ID (watchtree.Config.InstanceID), written as the lease owner.
	Owner string
	// Store is the lease store.
	Store Store
	// Policy is the LeasePolicy (TTL, RenewEvery, StandbyPoll, Margin, Balance), validated by New.
	Policy policy.Lease
	// Balancer shares leaderships out; nil (or Policy.Balance off) means no balancing.
	Balancer Balancer
	// IOTimeout bounds every lease store call. Default 10s, capped at the TTL.
	IOTimeout time.Duration
	// Clock times renewals, the demotion deadline, polls and expiry retries; the term is
	// measured on its monotonic reading (clock.Mono), never on Now. Default clock.Real().
	Clock clock.Clock
	// Logger, with the field stream=<Stream>. Default zap.NewNop().
	Logger *zap.Logger
	// Observer receives an observe.LeadershipChanged for every change of leadership
	// (acquired, lost, released, handed over, fenced), built here with Meta{Stream,
	// Clock.Now()}, on the actor goroutine. It must not block (the root passes its queue); a
	// panic in it is recovered and logged. Default observe.Nop.
	Observer observe.Observer
	// OnAcquired, when set, is called with the new epoch when the lease was acquired, on the
	// actor goroutine, before the supervisor hears of it: the stream's writes carry that epoch
	// from then on (the fencing epoch). It must not block. Optional.
	OnAcquired func(epoch int64)
	// OnValidUntil, when set, is called on the actor goroutine with the monotonic reading of
	// Clock (clock.Mono) until which this instance may act as the leader: lastRenewOk + TTL -
	// Margin after the acquisition and after each renewal (the moment the actor demotes itself
	// when no renewal succeeded), and 0 once it stops leading (a loss, a release). A monotonic
	// reading, not a wall time: the wall time may jump (a skewed clock) and must move no
	// deadline. The dispatcher checks it before every handler call, so that a leader whose
	// timers are late (a process paused past its lease) starts nothing after it. It must not
	// block. Optional.
	OnValidUntil func(mono time.Duration)
}

// validate checks the configuration; errors name the field.
func (c Config) validate() error {
	e := treekit.NewConfigErrors("leader", c.Stream)
	if c.Owner == "" {
		e.Add("Owner", "must not be empty")
	}
	if c.Store == nil {
		e.Add("Store", "must not be nil")
	}
	if c.IOTimeout < 0 {
		e.Add("IOTimeout", "must be >= 0")
	}
	e.Policies(func(pe *configcheck.Errors) { policyx.ValidateInto(pe, "Policy", c.Policy) })
	return e.Err()
}

func (c Config) withDefaults() Config {
	c.Policy = policyx.WithDefaults(c.Policy)
	if c.Policy.Balance == policy.BalanceOff {
		c.Balancer = nil
	}
	treekit.Fill(&c.IOTimeout, DefaultConfig().IOTimeout)
	c.IOTimeout = min(c.IOTimeout, c.Policy.TTL)
	treekit.Defaults(c.Stream, &c.Clock, &c.Logger, &c.Observer)
	return c
}
