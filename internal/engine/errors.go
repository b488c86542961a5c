package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// The sentinel errors the engine raises. The root package re-exports each under the same name
// (watchtree.ErrStopped is ErrStopped, ...), with its public documentation.
var (
	// ErrDuplicateStream: a stream of that name is already registered on the runtime.
	ErrDuplicateStream = errors.New("watchtree: duplicate stream name")
	// ErrUnknownStream: no stream of that name is registered on the runtime.
	ErrUnknownStream = errors.New("watchtree: unknown stream")
	// ErrNotStarted: the runtime has not been started yet.
	ErrNotStarted = errors.New("watchtree: not started")
	// ErrAlreadyStarted: Start was called on a started runtime.
	ErrAlreadyStarted = errors.New("watchtree: already started")
	// ErrStopped: the runtime (or the stream's supervisor) is stopped.
	ErrStopped = errors.New("watchtree: stopped")
	// ErrUnreachable: no MongoDB server answered Start within ConnectTimeout.
	ErrUnreachable = errors.New("watchtree: cannot reach MongoDB")
	// ErrObserverNotDrained: Stop's deadline passed before the Observer got every queued event.
	ErrObserverNotDrained = errors.New("watchtree: observer not drained")
	// ErrReplayUnavailable: a dead letter's event was not stored, so it cannot be replayed.
	ErrReplayUnavailable = errors.New("watchtree: dead letter cannot be replayed")
	// ErrSnapshotRunning: an on-demand snapshot of the stream is still running.
	ErrSnapshotRunning = errors.New("watchtree: an on-demand snapshot is already running")
	// ErrStreamNotRunning: the stream is not running on this instance.
	ErrStreamNotRunning = errors.New("watchtree: stream not running here")
	// ErrStandby: the SingleLeader stream is in standby on this instance (another one leads).
	ErrStandby = errors.New("watchtree: stream in standby here")
)

// unreachableError is Start's error when no server answered in time: it renders
// "watchtree: start: cannot reach MongoDB within 10s: <driver error>" and matches ErrUnreachable
// and the driver's error.
type unreachableError struct {
	within time.Duration // the bound that passed: ConnectTimeout, or less when ctx's deadline came first
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("watchtree: start: cannot reach MongoDB within %v: %v", e.within, e.err)
}

func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// ErrPoolExhausted: an operation of a stream waited for a connection from the client's own
// connection pool (every connection was in use, up to maxPoolSize) until its bound ran out; the
// server itself was never asked.
var ErrPoolExhausted = errors.New("watchtree: the client's connection pool is exhausted")

// poolCheckoutRE matches how the driver's pool reports a checkout that ran out of time
// (topology.WaitQueueTimeoutError), with the pool's size then. It is matched in the text,
// because a failure reported across the tree's messages (errdetail) keeps only the text of a
// client-side error, and the driver's error keeps the numbers unexported.
var poolCheckoutRE = regexp.MustCompile(`while checking out a connection from connection pool.*; total connections: (\d+), maxPoolSize: (\d+)`)

// poolRemedy says what to do about an exhausted pool.
const poolRemedy = "raise the client's maxPoolSize (options.Client().SetMaxPoolSize, or maxPoolSize in the URI), " +
	"or let Collection streams share a cursor (Stream.Cursor at its default, not Dedicated), which keeps many streams on few connections"

// poolWait reports whether err reports the driver's timeout of a pool checkout while every
// connection of the pool was in use (total connections at maxPoolSize). A checkout that failed
// with room left in the pool is not the pool's fault: its context had already ended (a getMore
// that ran out of its bound, on a frozen server, leaves the driver's resume such a context).
func poolWait(err error) bool {
	if err == nil {
		return false
	}
	m := poolCheckoutRE.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	total, err1 := strconv.ParseUint(m[1], 10, 64)
	limit, err2 := strconv.ParseUint(m[2], 10, 64)
	return err1 == nil && err2 == nil && limit > 0 && total >= limit
}

// poolError is a failure that waited for a connection from the client's own pool: it says so
// and what to do, keeps the original text, and matches ErrPoolExhausted and the original error.
type poolError struct{ err error }

func (e *poolError) Error() string {
	return "waited for a connection from the client's connection pool, not for the server (" + poolRemedy + "): " + e.err.Error()
}

func (e *poolError) Unwrap() []error { return []error{ErrPoolExhausted, e.err} }

// explainPool returns err as a poolError when it is a pool checkout's timeout (and not one
// already), else err itself.
func explainPool(err error) error {
	if errors.Is(err, ErrPoolExhausted) || !poolWait(err) {
		return err
	}
	return &poolError{err: err}
}

// alsoError is err that matches also too (errors.Is), with err's text.
type alsoError struct{ err, also error }

func (e *alsoError) Error() string   { return e.err.Error() }
func (e *alsoError) Unwrap() []error { return []error{e.err, e.also} }
