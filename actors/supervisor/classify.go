package supervisor

import (
	"errors"
	"fmt"
)

// ErrChildStopped is the cause of a death when the stream actor stopped by itself (it was not
// stopped by the supervisor). The default classifier treats it as transient.
var ErrChildStopped = errors.New("supervisor: stream actor stopped unexpectedly")

// ErrSiblingFailed wraps the cause when a sibling (checkpointer, dispatcher) failed: the sibling
// is restarted in place and the stream actor is restarted through the policy, as for a death.
var ErrSiblingFailed = errors.New("supervisor: sibling failed")

// Classifier decides what a failure means. reason is what protoactor reported: a *Failure when
// the actor called Fail, a *PanicError when it panicked under this package's middleware, the
// value passed to EscalateFailure otherwise. It returns whether the failure is terminal (give up at once, whatever the attempts
// left) and the cause to report, which should wrap reason when reason is an error. It runs on
// the supervisor's goroutine and must not block.
type Classifier func(reason any) (terminal bool, cause error)

// DefaultClassifier returns a Classifier that treats every failure as transient unless its
// cause wraps one of the terminal sentinels (errors.Is), for example the root package's history-
// lost, invalidate-stop, auth and configuration errors. Failure and PanicError unwrap to the
// error they carry, so it is matched too.
func DefaultClassifier(terminal ...error) Classifier {
	return func(reason any) (bool, error) {
		cause := AsError(reason)
		for _, t := range terminal {
			if t != nil && errors.Is(cause, t) {
				return true, cause
			}
		}
		return false, cause
	}
}

// AsError turns a failure reason into an error: errors (including *Failure and *PanicError) are
// returned as they are, nil becomes an error saying so, and any other value is formatted with %v.
func AsError(reason any) error {
	switch r := reason.(type) {
	case error:
		return r
	case nil:
		return errors.New("supervisor: failure with a nil reason")
	default:
		return fmt.Errorf("%v", r)
	}
}

// panicOf returns the *PanicError in err's chain, or nil.
func panicOf(err error) *PanicError {
	var pe *PanicError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
