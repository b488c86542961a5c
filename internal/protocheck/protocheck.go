// Package protocheck guards the rule that actors of a stream tree talk to each other in protobuf
// only, so that any of those messages could cross a process boundary (a remote console, a
// leader on another instance) unchanged. What an actor sends to itself (timer ticks, a
// goroutine's report) may stay plain Go.
package protocheck

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// Violation is one non-protobuf message sent from one actor to another.
type Violation struct {
	From, To *actor.PID
	Message  any
}

// SenderMiddleware calls report for every message an actor sends to another actor that is not
// a protobuf message. Messages to the sender itself are allowed, and so are protoactor's own
// system and auto-receive messages. The message is still sent: the check observes, it does not
// change what the actor does.
func SenderMiddleware(report func(Violation)) actor.SenderMiddleware {
	return func(next actor.SenderFunc) actor.SenderFunc {
		return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			if !allowed(ctx.Self(), target, env.Message) {
				report(Violation{From: ctx.Self(), To: target, Message: env.Message})
			}
			next(ctx, target, env)
		}
	}
}

func allowed(self, target *actor.PID, msg any) bool {
	switch msg.(type) {
	case proto.Message, actor.SystemMessage, actor.AutoReceiveMessage:
		return true
	}
	return self != nil && target != nil && self.Equal(target)
}
