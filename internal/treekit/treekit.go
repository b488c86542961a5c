// Package treekit holds what the actors of one stream tree share without importing each other:
// the incarnation number the supervisor gives each instance of the stream actor, and the report
// a stream actor sends its supervisor once its cursor is open (the supervisor sets the number,
// through a receiver middleware; the stream actor reads it); the failure reasons a supervisor's
// classifier receives (Failure, PanicError) and the sentinels the tree's actors fail with, which
// the root package re-exports; the mailboxes and the goroutine pool.
package treekit

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

// Props returns the props of one actor of a stream tree, made by producer, with protoactor's
// lock-free unbounded mailbox. protoactor's default mailbox preallocates a ring of ten slots
// for user messages (~230 B with its structs) in every actor, and an idle runtime holds four
// or five actors per stream; the lock-free queue starts with one 16-byte node and allocates a
// node per message, and the tree's messages travel per batch of events, not per event.
//
// The mailboxes run on the tree's goroutine pool (see Go), not on a new goroutine each time a
// mailbox wakes up.
func Props(producer actor.Producer) *actor.Props {
	return actor.PropsFromProducer(producer, actor.WithMailbox(lockfreeMailbox), actor.WithDispatcher(goroutines))
}

// lockfreeMailbox is the mailbox producer of Props; one for every tree.
var lockfreeMailbox = actor.UnboundedLockfree()
