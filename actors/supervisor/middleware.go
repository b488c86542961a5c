package supervisor

import (
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/actors/streamtree"
)

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

// childMiddleware numbers incarnations (when q is not nil) and turns panics into
// *streamtree.PanicError carrying the stack and the incarnation; a *streamtree.Failure (streamtree.Fail
// without EscalateFailure) is no panic of the actor's and passes unchanged.
func childMiddleware(q *incarnations) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			if q != nil {
				if _, ok := env.Message.(*actor.Started); ok {
					if n, ok := q.pop(); ok {
						streamtree.SetIncarnation(ctx, n)
					}
				}
			}
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if f, ok := r.(*streamtree.Failure); ok {
					panic(f)
				}
				pe, ok := r.(*streamtree.PanicError) // already wrapped by an inner layer
				if !ok {
					pe = &streamtree.PanicError{Value: r, Stack: debug.Stack(), Incarnation: streamtree.Incarnation(ctx)}
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
