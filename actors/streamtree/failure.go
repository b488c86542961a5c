package streamtree

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// Failure is the failure reason of a supervised actor that failed on purpose, through Fail,
// rather than by panicking: a start position that could not be resolved, a cursor that died, a
// terminal error. Its text is Err's own (no "panic: " prefix, no stack), and errors.Is and
// errors.As see through it to Err.
type Failure struct {
	// Err is the error the actor failed with. Never nil.
	Err error
	// Incarnation is the incarnation of the actor instance that failed (0 for siblings), so that
	// the supervisor drops the failure of an instance it already replaced.
	Incarnation uint64
}

// Error returns Err's text.
func (f *Failure) Error() string { return f.Err.Error() }

// Unwrap returns Err.
func (f *Failure) Unwrap() error { return f.Err }

// Fail reports err (not nil) as the failure of the calling actor, as a panic would, but without
// one: protoactor suspends the actor's mailbox and hands its supervisor a *Failure carrying err
// and the incarnation, where a panic would hand it a *PanicError. Call it on the actor's own
// goroutine and return from Receive right after; the actor processes nothing more until its
// supervisor restarts, resumes or stops it.
func Fail(ctx actor.Context, err error) {
	f := &Failure{Err: err, Incarnation: Incarnation(ctx)}
	if esc, ok := ctx.(interface{ EscalateFailure(reason, message any) }); ok {
		esc.EscalateFailure(f, ctx.Message())
		return
	}
	// A context decorator hides EscalateFailure: fail by a panic instead; the supervisor's child
	// middleware hands a *Failure on unchanged, so the supervisor sees the same reason.
	panic(f)
}

// PanicError is the failure reason of a supervised actor that panicked: the middleware the
// supervisor installs on every child recovers the panic, records the stack and panics again
// with a *PanicError, which protoactor hands to the supervisor's HandleFailure as the reason.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the goroutine stack at the panic (runtime/debug.Stack).
	Stack []byte
	// Incarnation is the incarnation of the actor instance that panicked (0 for siblings).
	Incarnation uint64
}

// Error returns "panic: <value>", without the stack.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is/As see through the panic.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// AsError turns the failure reason a supervisor's classifier receives into an error: errors
// (including *Failure and *PanicError) are returned as they are, nil becomes an error saying so,
// and any other value is formatted with %v.
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

// TerminalOn returns a supervisor classifier (supervisor.Classifier) that treats a failure as
// terminal when its cause (AsError) wraps one of terminal (errors.Is), and as transient
// otherwise; the cause it reports is AsError's. TerminalOn() treats every failure as transient:
// it is the supervisor's default. Failure and PanicError unwrap to the error they carry, so it
// is matched too.
func TerminalOn(terminal ...error) func(reason any) (bool, error) {
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
