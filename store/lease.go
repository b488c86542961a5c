package store

import (
	"errors"
	"time"
)

// Lease is the leadership record of one SINGLE_LEADER stream: whoever holds it unexpired is the
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
