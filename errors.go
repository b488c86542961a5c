package watchtree

import (
	"errors"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/configerr"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/store"
)

// Sentinel errors. Match them with errors.Is: the runtime wraps them with the stream name and the
// cause, so comparing with == does not work. The terminal ones raised inside a stream tree
// (ErrHistoryLost, ErrInvalidated, ErrFenced) are the very values the actors and the stores
// raise, so errors.Is matches them without any translation.
var (
	// ErrInvalidConfig is matched by every *ConfigError: a Config, Stream or policy value broke a
	// rule. It is configerr.ErrInvalid, the very value the policies' and the actors' validators
	// use.
	ErrInvalidConfig = configerr.ErrInvalid

	// ErrDuplicateStream means a stream with the same Name is already spawned on the runtime.
	// Names identify checkpoint, lease and dead-letter records, so they must be unique.
	ErrDuplicateStream = engine.ErrDuplicateStream

	// ErrNoHandler means a Stream sets none of OnInsert, OnUpdate, OnReplace, OnDelete and OnChange.
	ErrNoHandler = errors.New("watchtree: stream has no handler")

	// ErrUnknownStream means no stream of that name is spawned on the runtime.
	ErrUnknownStream = engine.ErrUnknownStream

	// ErrNotStarted means the runtime (or the stream) has not been started yet.
	ErrNotStarted = engine.ErrNotStarted

	// ErrAlreadyStarted means Start was called on a runtime (or stream) that is already running.
	ErrAlreadyStarted = engine.ErrAlreadyStarted

	// ErrStopped means the runtime (or the stream) is stopped and refuses the request.
	ErrStopped = engine.ErrStopped

	// ErrHistoryLost means the saved resume position is no longer in the oplog
	// (ChangeStreamHistoryLost 286, ChangeStreamFatalError 280 or CappedPositionLost 136) and the
	// stream's OnHistoryLost policy is Fail. It is terminal: the stream stays crashed until an
	// operator acts. The checkpointer raises it; this is the same value.
	ErrHistoryLost = streamtree.ErrHistoryLost

	// ErrGaveUp means the RestartPolicy ran out of attempts. It is terminal: the stream stays
	// crashed until an operator starts it. The supervisor raises it around the latest death's
	// cause; this is the same value.
	ErrGaveUp = streamtree.ErrGaveUp

	// ErrInvalidated means the change stream was invalidated (drop, rename or dropDatabase of the
	// watched namespace) and the stream's OnInvalidate policy is InvalidateStop. It is terminal.
	// The stream actor raises it; this is the same value.
	ErrInvalidated = streamtree.ErrInvalidated

	// ErrUnreachable means no MongoDB server answered within Config.ConnectTimeout (or the
	// context's earlier deadline), or the connection failed: Start could not ping the primary
	// or create the store indexes. The error wraps the driver's error too (a server selection
	// error naming the topology). The runtime stays unstarted; Start may be called again.
	ErrUnreachable = engine.ErrUnreachable

	// ErrObserverNotDrained means Stop's deadline passed before Config.Observer received every
	// queued event: its OnEvent is slower than the events came. The error counts the events
	// (discarded, and counted in ObserverStats.Dropped); it says nothing about the streams,
	// which Stop reports separately by name.
	ErrObserverNotDrained = engine.ErrObserverNotDrained

	// ErrFenced means a checkpoint or lease write was refused because another instance holds a
	// newer lease epoch. The deposed instance stops processing the stream at once. The stores
	// raise it (store.ErrFenced is the same value).
	ErrFenced = store.ErrFenced

	// ErrSnapshotMixedIDs means a snapshot cannot split its collection into _id ranges because
	// the _id values mix BSON types (numbers and strings, say): a range query on _id compares
	// values of one type only, so some documents would be skipped. The snapshot fails instead.
	// The snapshot actor raises it; this is the same value. It is terminal.
	ErrSnapshotMixedIDs = streamtree.ErrMixedIDTypes
)

// ConfigError reports one broken configuration rule: Stream names the stream (empty outside
// one), Field the field (for example "Retry.Multiplier" inside a Stream, "Config.ShutdownTimeout"
// outside), Rule the rule and the rejected value, and Err an optional sentinel (ErrNoHandler,
// ErrDuplicateStream). Every Validate method of this package returns *ConfigError values (joined
// with errors.Join when several rules are broken); find one with errors.As. It matches
// ErrInvalidConfig with errors.Is, and also its Err when set. It is declared in package
// configerr (its fields are documented there), which the policies' and the actors' validators
// use too, so errors.As finds it whichever layer checked the value.
type ConfigError = configerr.Error

// Permanent marks err as permanent: the event's remaining retries are skipped and it is
// dead-lettered at once. The mark survives wrapping (fmt.Errorf("...: %w", Permanent(err)) is
// still permanent); detect it with IsPermanent. Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// permanenter is the behaviour IsPermanent looks for anywhere in an error chain. Users may
// implement it on their own error types instead of calling Permanent.
type permanenter interface{ Permanent() bool }

// IsPermanent reports whether err, or any error it wraps, is permanent: made by Permanent, a
// *DecodeError, or any error type with a `Permanent() bool` method returning true.
func IsPermanent(err error) bool {
	for _, e := range chain(err) {
		if p, ok := e.(permanenter); ok && p.Permanent() {
			return true
		}
	}
	return false
}

// Skip returns an error that settles the event on purpose: no retry, no dead letter. The event
// counts as skipped (messages.Outcome SKIPPED), is logged with reason and reported to the Observer
// as a Skipped event. The mark survives wrapping; detect it with IsSkip.
func Skip(reason string) error { return &skipError{reason: reason} }

type skipError struct{ reason string }

func (e *skipError) Error() string { return "watchtree: skipped: " + e.reason }

// IsSkip reports whether err, or any error it wraps, was made by Skip. A Skip takes precedence
// over Permanent when an error chain carries both.
func IsSkip(err error) bool {
	var s *skipError
	return errors.As(err, &s)
}

// skipReason returns the reason given to Skip, if err carries one.
func skipReason(err error) (string, bool) {
	var s *skipError
	if errors.As(err, &s) {
		return s.reason, true
	}
	return "", false
}

// chain flattens an error tree (Unwrap() error and Unwrap() []error) in depth-first order.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}
