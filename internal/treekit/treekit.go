// Package treekit holds the engine-side kit the actors of one stream tree share without importing
// each other: the mailboxes and the goroutine pool, the actors' names, the lane bound, timers
// and bounded calls, the Observer reporting (Report) and the Config checks (ConfigErrors). What
// outside code implementing or supervising a tree's actor needs (the incarnation, the failure
// reasons, the terminal sentinels) is in the public actors/streamtree.
package treekit

import (
	"github.com/asynkron/protoactor-go/actor"
)

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

// New is every actor's New: it validates cfg as the caller gave it (so that an error names what
// the caller wrote, not a default), fills its defaults, and returns Props whose instances are
// made by newActor from that one filled config (a restarted instance sees the same config).
func New[C any, A actor.Actor](cfg C, validate func(C) error, withDefaults func(C) C, newActor func(*C) A) (*actor.Props, error) {
	if err := validate(cfg); err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	return Props(func() actor.Actor { return newActor(&cfg) }), nil
}
