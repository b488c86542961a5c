package supervisor

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/ctxext"

	"github.com/watchtree/watchtree/messages"
)

// PanicError is the failure reason of a supervised actor that panicked: the middleware this
// package installs on every child recovers the panic, records the stack and panics again with a
// *PanicError, which protoactor hands to the supervisor's HandleFailure as the reason.
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
	// A context decorator hides EscalateFailure: fail by a panic instead; the middleware hands
	// a *Failure on unchanged, so the supervisor sees the same reason.
	panic(f)
}

// Incarnation returns the incarnation number the supervisor gave to the current instance of the
// stream actor, from 1; it is 0 for an actor that is not a supervised stream child. It changes on
// every restart (protoactor keeps the context, the supervisor numbers the instances). Call it
// from the actor's own goroutine.
func Incarnation(ctx actor.ReceiverContext) uint64 {
	ext, _ := getExtension(ctx).(*incarnationExt)
	if ext == nil {
		return 0
	}
	return ext.n
}

// NotifyResubscribed tells the parent supervisor that this stream actor's cursor is open, which
// resets the attempt counter and moves the stream to running. The stream actor calls it from its
// own goroutine once the change stream is open (not when the cursor goroutine is merely started).
func NotifyResubscribed(ctx actor.Context) {
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, &messages.Resubscribed{Incarnation: Incarnation(ctx)})
	}
}

// getExtension reads the incarnation extension. protoactor's extension table panics on an id it
// has not grown to yet, which means the extension was never set.
func getExtension(ctx actor.ReceiverContext) (ext ctxext.ContextExtension) {
	defer func() {
		if recover() != nil {
			ext = nil
		}
	}()
	return ctx.Get(incarnationExtID)
}

var incarnationExtID = ctxext.NextContextExtensionID()

type incarnationExt struct{ n uint64 }

func (*incarnationExt) ExtensionID() ctxext.ContextExtensionID { return incarnationExtID }

// incarnations is the FIFO of incarnation numbers handed from the supervisor to one spawned
// child PID. The supervisor pushes a number right before each spawn or RestartChildren, and the
// child's middleware pops one on each *actor.Started; since every spawn or restart produces
// exactly one Started, in order, each instance gets the number meant for it.
type incarnations struct {
	mu sync.Mutex
	q  []uint64
}

func (q *incarnations) push(n uint64) {
	q.mu.Lock()
	q.q = append(q.q, n)
	q.mu.Unlock()
}

func (q *incarnations) pop() (uint64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.q) == 0 {
		return 0, false
	}
	n := q.q[0]
	q.q = q.q[1:]
	return n, true
}

// childMiddleware numbers incarnations (when q is not nil) and turns panics into *PanicError
// carrying the stack and the incarnation; a *Failure (Fail without EscalateFailure) is no panic
// of the actor's and passes unchanged.
func childMiddleware(q *incarnations) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			if q != nil {
				if _, ok := env.Message.(*actor.Started); ok {
					if n, ok := q.pop(); ok {
						ctx.Set(&incarnationExt{n: n})
					}
				}
			}
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if f, ok := r.(*Failure); ok {
					panic(f)
				}
				pe, ok := r.(*PanicError) // already wrapped by an inner layer
				if !ok {
					pe = &PanicError{Value: r, Stack: debug.Stack(), Incarnation: Incarnation(ctx)}
				}
				switch env.Message.(type) {
				case *actor.Restarting, *actor.Stopping, *actor.Stopped:
					// The instance is going away anyway; failing here would leave protoactor's
					// restart or stop half done and the actor wedged.
					ctx.Logger().Error("panic while stopping; dropped", slog.Any("panic", pe.Value),
						slog.String("stack", string(pe.Stack)))
					return
				}
				panic(pe)
			}()
			next(ctx, env)
		}
	}
}
