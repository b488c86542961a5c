package supervisor

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/treekit"
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

// Failure is the failure reason of a supervised actor that failed on purpose (treekit.Fail)
// rather than by panicking; see treekit.Failure.
type Failure = treekit.Failure

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
						treekit.SetIncarnation(ctx, n)
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
					pe = &PanicError{Value: r, Stack: debug.Stack(), Incarnation: treekit.Incarnation(ctx)}
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
