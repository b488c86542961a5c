package store

import (
	"context"
	"errors"
	"time"
)

// Lease is the leadership record of one SingleLeader stream: whoever holds it unexpired is the
// only instance that processes the stream. There is one record per stream name; it is never
// deleted, so its Epoch only grows.
//
// Expiry is judged by the lease store's server clock (MongoDB's $$NOW, Redis's key TTL and TIME),
// never by the caller's: AcquiredAt, ExpiresAt and ServerNow are server times, and Remaining is
// the lease's time left as the server saw it when it answered, so a caller that schedules by it
// needs no synchronised clock.
type Lease struct {
	// Name is the stream name, the record's key.
	Name string
	// Owner is the instance ID of the holder; empty when the lease was released.
	Owner string
	// Epoch is the fencing epoch of the latest acquisition: it grows by at least one with each
	// acquisition, and every checkpoint and dead-letter write of the holder carries it.
	Epoch int64
	// AcquiredAt is when the current epoch was acquired (server clock).
	AcquiredAt time.Time
	// ExpiresAt is when the lease lapses unless renewed (server clock). A released lease
	// expires at its release time.
	ExpiresAt time.Time
	// ServerNow is the server's time when it answered; zero when the store does not report it.
	ServerNow time.Time
	// Remaining is ExpiresAt - ServerNow, floored at 0: 0 means free (expired or released).
	Remaining time.Duration
}

// Held reports whether the lease is held: it has an owner and had time left when read.
func (l Lease) Held() bool { return l.Owner != "" && l.Remaining > 0 }

// Instance is the heartbeat record of one runtime instance in a lease store: instances find
// each other through it to share out the leaderships (LeasePolicy.Balance).
type Instance struct {
	// ID is the instance ID (watchtree.Config.InstanceID).
	ID string
	// ExpiresAt is when the record lapses unless the instance beats again (server clock).
	ExpiresAt time.Time
}

// Lease errors. Implementations wrap them with the stream name, the owner and the epochs.
var (
	// ErrLeaseHeld is returned by Acquire when another owner holds the lease unexpired. The
	// caller is a standby; the returned Lease names the holder and its time left.
	ErrLeaseHeld = errors.New("watchtree: lease held by another instance")

	// ErrLeaseLost is returned by Renew and Release when the caller no longer holds the lease
	// under the epoch it names: it expired, was released, or another owner acquired it. The
	// record is left unchanged. It is never transient: the caller has lost the leadership.
	ErrLeaseLost = errors.New("watchtree: lease lost")
)

// LeaseStore holds the leases of SingleLeader streams and the heartbeats of the runtime
// instances that share them out (watchtree.Config.Leases). Expiry is judged by the store's own
// clock, never the caller's. The leader actor of each stream calls Acquire, Renew, Release and
// WatchLease; the runtime's balancer calls Heartbeat, Instances and Leave, and its dead-letter
// fencing GetLease. store/mongostore, store/redisstore and store/memstore (Leases) implement
// it, and store/storetest.TestLeaseStore is its contract.
//
// Every method honours ctx: a done context fails the call with an error matching ctx.Err() and
// changes nothing.
type LeaseStore interface {
	// Acquire takes the lease of name for owner for ttl when it is free (never held, expired by
	// the store's clock, released) or already owner's, with a new, higher epoch (re-acquiring
	// one's own lease starts a new epoch too, fencing an older incarnation of the owner); else
	// it returns the holder's lease and an error matching ErrLeaseHeld.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error)
	// Renew extends the lease to store now + ttl when owner holds it unexpired under epoch;
	// else it fails with an error matching ErrLeaseLost and changes nothing.
	Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (Lease, error)
	// Release frees owner's lease under epoch at once (the epoch stays, so the next acquisition
	// gets a higher one); else it fails with an error matching ErrLeaseLost and changes
	// nothing.
	Release(ctx context.Context, name, owner string, epoch int64) error
	// GetLease reads the lease of name with Remaining judged by the store's clock; ok is false
	// (and err nil) when there is no record.
	GetLease(ctx context.Context, name string) (l Lease, ok bool, err error)
	// WatchLease returns a channel that receives a value (changes coalesce) whenever the lease
	// of name changes, and is closed when ctx ends. It is an accelerator: callers still poll,
	// so a store may deliver late or not at all while its feed is down.
	WatchLease(ctx context.Context, name string) <-chan struct{}
	// Heartbeat records instance id as alive until store now + ttl (an upsert by id).
	Heartbeat(ctx context.Context, id string, ttl time.Duration) error
	// Instances lists the instances whose heartbeat has not expired by the store's clock, by
	// ID.
	Instances(ctx context.Context) ([]Instance, error)
	// Leave removes instance id's heartbeat at once (a graceful shutdown), so that the others
	// take over its share without waiting for the record to expire.
	Leave(ctx context.Context, id string) error
}
