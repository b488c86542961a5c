package engine

import (
	"errors"
	"fmt"
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
