// Package supervisor is the per-stream supervisor actor: the lifecycle state machine of one
// change stream (starting, standby, running, backoff, stopped, crashed) and its RestartPolicy.
//
// The tree under one supervisor:
//
//	supervisor "order-stream"   this package; implements actor.SupervisorStrategy itself
//	├── checkpointer            sibling: spawned once, never restarted with the stream actor
//	├── dispatcher              sibling
//	└── stream                  the restartable stream actor (owns the cursor goroutine)
//
// The stream actor is restarted in place (same PID, new instance) after a death, after the
// delay of the n-th attempt under Config.Policy (watchtree.RestartPolicy documents the
// formula and its defaults). The attempt counter n resets when the new instance reports its cursor
// open with NotifyResubscribed; every death consumes one attempt; the death that would need attempt
// MaxAttempts+1, or any death classified terminal, gives up at once (crashed, stream actor
// stopped) until an operator Start. Siblings keep their PIDs and state across those restarts.
//
// Control is by protobuf messages (package messages): Start, Stop, Restart and StatusRequest,
// each answered with a StatusReply when sent as a request. An operator Restart of a stream that
// is up runs the graceful stop's sequence (cursor closed, dispatcher drained, final checkpoint;
// the lease kept) and then launches the next incarnation, so that the new cursor does not read
// again what the old one delivered. Every transition is logged with zap
// (field stream), counted (StatusReply.Transitions), reported to Config.OnTransition, and, as the
// lifecycle event it means for the user (observe.Stopped, observe.Restarted), to Config.Observer.
// AwaitCaughtUp{cluster_time} is answered with a CaughtUpReply once the checkpointer's
// SettledThrough is after cluster_time, at once when it already is or the stream is standby,
// stopped or crashed, and on entering one of those states (caught_up false). NamespaceCheck
// (from the runtime) sets or clears the warning StatusReply.warnings carries.
//
// What the stream actor must do:
//   - call streamtree.NotifyResubscribed(ctx) once its change stream is open;
//   - fail with streamtree.Fail(ctx, err) when its cursor dies or its start fails, with an error the
//     Classifier can recognise as terminal when it is (a panic is for bugs: it is reported as
//     one, "panic: ..." with the stack);
//   - cancel its cursor goroutine on both *actor.Restarting and *actor.Stopping.
//
// A failure reaches the Classifier as a *streamtree.Failure (from streamtree.Fail, carrying the error and
// the incarnation) or as a *streamtree.PanicError: panics in a supervised actor are recovered by a
// receiver middleware the supervisor adds to its children and carry the stack. Panics while
// handling *actor.Restarting, *actor.Stopping or *actor.Stopped are logged and dropped instead:
// failing there would wedge protoactor's stop protocol.
package supervisor
