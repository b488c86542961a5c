package dispatcher

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/enumstr"
	"github.com/watchtree/watchtree/messages"
)

// Router turns one raw change event into a call of the user's typed handler. The root package
// builds it from a watchtree.Stream[T]; the dispatcher sees only this non-generic interface.
//
// A Router is used by one dispatcher at a time but from several lanes concurrently, so Route and
// Classify must be safe for concurrent use. They must not block: they run on the lane goroutine
// before the handler.
type Router interface {
	// Route decodes raw once and picks the handler. It returns exactly one of:
	//   - an Invocation (and OUTCOME_UNSPECIFIED, nil) when a handler is to be called;
	//   - a nil Invocation and OUTCOME_UNHANDLED (no handler for the operation type) or
	//     OUTCOME_FILTERED (the stream's Filter rejected the event): the event settles with that
	//     outcome without any call;
	//   - a nil Invocation and a non-nil error when the event does not decode. That error is
	//     permanent (Classify returns Permanent): dead-letter the event without calling anything.
	//
	// Route picks the handler before decoding the documents, so an event nobody handles settles
	// as unhandled even if its document would not decode. The Filter runs after decoding, only for
	// events with a handler.
	//
	// Route does not recover panics (a Filter may panic): the dispatcher recovers them, with the
	// stack, as an error of the event.
	Route(raw bson.Raw) (Invocation, messages.Outcome, error)

	// Classify tells how a non-nil error returned by Route or Invocation.Call is treated: retry,
	// permanent (dead letter now) or skip (settle on purpose, no dead letter). For Skipped,
	// detail is the reason the handler gave (watchtree.Skip's argument), which the dispatcher
	// reports as observe.Skipped.Detail; it is ignored for the other classes.
	Classify(err error) (class ErrorClass, detail string)
}

// Invocation is one routed event bound to its handler. The same Invocation is called once per
// attempt; the event is decoded once and shared by all attempts.
type Invocation interface {
	// Call runs the handler with ctx and the 1-based attempt number (visible to the handler as
	// Event.Attempt). Calls of one Invocation must not overlap.
	//
	// Call does not recover handler panics: the dispatcher recovers them, with the stack, and
	// treats them as a retryable error of the event.
	Call(ctx context.Context, attempt int) error
}

// Releaser is implemented by an Invocation that may be reused once its event is done with it.
// The dispatcher calls Release once, after the last Call of the Invocation returned (or ended
// its goroutine with runtime.Goexit) and before the event's settlement is published, and never
// uses the Invocation afterwards.
type Releaser interface {
	// Release gives the Invocation back for reuse. It cannot fail, and must not block.
	Release()
}

// ErrorClass is how the dispatcher treats a handler error.
type ErrorClass int

const (
	// Retryable errors are retried following the RetryPolicy; when attempts run out the event is
	// dead-lettered.
	Retryable ErrorClass = iota
	// Permanent errors (watchtree.Permanent, decode errors) skip the remaining attempts: the event
	// is dead-lettered at once.
	Permanent
	// Skipped errors (watchtree.Skip) settle the event on purpose with OUTCOME_SKIPPED, without a
	// dead letter; they are logged and counted.
	Skipped
)

// String returns "Retryable", "Permanent" or "Skipped".
func (c ErrorClass) String() string { return enumstr.Of(errorClassNames, c, "ErrorClass") }

var errorClassNames = []string{Retryable: "Retryable", Permanent: "Permanent", Skipped: "Skipped"}
