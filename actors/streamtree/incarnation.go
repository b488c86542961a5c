// Package streamtree is the contract between a stream tree's supervisor (actors/supervisor) and
// the actors it supervises, for whoever implements, supervises or classifies the failures of
// one: the incarnation number the supervisor gives each instance of the stream actor
// (Incarnation, SetIncarnation), the report a stream actor sends once its cursor is open
// (NotifyResubscribed), the failure reasons a supervisor's classifier receives (Failure through
// Fail, PanicError) with AsError and TerminalOn to classify them, and the sentinels the tree's
// actors fail with, which the root package re-exports (watchtree.ErrHistoryLost, ...).
package streamtree

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/ctxext"

	"github.com/watchtree/watchtree/internal/wire"
)

// Incarnation returns the incarnation number the supervisor gave to the current instance of the
// stream actor, from 1; it is 0 for an actor that is not a supervised stream child. It changes on
// every restart (protoactor keeps the context, the supervisor numbers the instances). Call it
// from the actor's own goroutine.
func Incarnation(ctx actor.ReceiverContext) uint64 {
	ext, _ := extension(ctx).(*incarnationExt)
	if ext == nil {
		return 0
	}
	return ext.n
}

// SetIncarnation records n as the incarnation of the instance ctx belongs to. The supervisor's
// child middleware calls it on *actor.Started, before the actor sees the message.
func SetIncarnation(ctx actor.ReceiverContext, n uint64) { ctx.Set(&incarnationExt{n: n}) }

// NotifyResubscribed tells the parent supervisor that this stream actor's cursor is open, which
// resets the attempt counter and moves the stream to running. The stream actor calls it from its
// own goroutine once the change stream is open (not when the cursor goroutine is merely started).
func NotifyResubscribed(ctx actor.Context) {
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, &wire.Resubscribed{Incarnation: Incarnation(ctx)})
	}
}

// extension reads the incarnation extension. protoactor's extension table panics on an id it has
// not grown to yet, which means the extension was never set.
func extension(ctx actor.ReceiverContext) (ext ctxext.ContextExtension) {
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
