package observe

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// HandlerTracer is an optional interface of an Observer: when watchtree.Config.Observer
// implements it, TraceHandler is called before every handler call (each attempt, and each
// Replay) with the call's description, the handler runs with the context it returns, and the
// done function it returns is called once with the handler's result. It feeds tracing: the
// OpenTelemetry adapter (module otel) starts a span there, so that spans the handler starts
// are its children.
//
// It exists beside the events of OnEvent because a span around the handler must be started
// before the call, on the goroutine that makes it, and be in the handler's context; the
// events go through a lossy queue after the fact.
//
// Like HandlerObserver it is called synchronously, on the lane goroutine that runs the
// handler, concurrently for different lanes and streams: it must be safe for concurrent use
// and must not block. A panic in TraceHandler is recovered and logged, and the handler then
// runs with its own context; a panic in done is recovered and logged too. Neither fails the
// event. done is also called when the handler panics or calls runtime.Goexit, with
// ErrHandlerAborted. Multi passes the calls on to the members that implement it, each
// wrapping the context of the one before.
type HandlerTracer interface {
	// TraceHandler reports the start of one handler call and returns the context the handler
	// runs with (ctx, or one derived from it) and the function to call with its result.
	TraceHandler(ctx context.Context, call HandlerCall) (context.Context, func(err error))
}

// ErrHandlerAborted is the result a HandlerTracer's done function receives when the handler
// panicked or called runtime.Goexit: the dispatcher recovers and retries such a call.
var ErrHandlerAborted = errHandlerAborted{}

type errHandlerAborted struct{}

func (errHandlerAborted) Error() string { return "observe: handler panicked or called runtime.Goexit" }

// HandlerCall describes one handler call to a HandlerTracer.
type HandlerCall struct {
	// Stream is the stream's Name.
	Stream string
	// EventID is the event's ID (watchtree.Event.ID: its resume token's _data; a snapshot
	// event's "snapshot:..." ID), empty when the event has none.
	EventID string
	// Namespace is the event's "database.collection" ("database" alone for a database-wide
	// event such as dropDatabase; empty when the event has no ns).
	Namespace string
	// OperationType is the event's operation type as the server spells it ("insert",
	// "update", ...; "snapshot" for a snapshot document).
	OperationType string
	// Attempt is the 1-based attempt (watchtree.Event.Attempt); a Replay is attempt 1.
	Attempt int
	// Raw is the change event as the stream read it (fullDocument, updateDescription, ...).
	// It is shared with the dispatcher: read it during TraceHandler only, never modify or
	// keep it.
	Raw bson.Raw
}

// traceMulti is a Multi with at least one HandlerTracer member.
type traceMulti struct{ multi }

func (m traceMulti) TraceHandler(ctx context.Context, call HandlerCall) (context.Context, func(err error)) {
	return m.multi.traceHandler(ctx, call)
}

// traceHandlerMulti is a Multi with both a HandlerObserver and a HandlerTracer member.
type traceHandlerMulti struct{ multiHandler }

func (m traceHandlerMulti) TraceHandler(ctx context.Context, call HandlerCall) (context.Context, func(err error)) {
	return m.multi.traceHandler(ctx, call)
}

// traceHandler calls the tracers in order, each with the context of the one before; the
// returned done calls their done functions in reverse order (innermost first). A panic of one
// is re-raised by done after the others ran, as OnEvent re-raises after every member saw the
// event.
func (m multi) traceHandler(ctx context.Context, call HandlerCall) (context.Context, func(err error)) {
	var dones []func(error)
	var first any
	for _, o := range m {
		ht, ok := o.(HandlerTracer)
		if !ok {
			continue
		}
		func() {
			defer func() {
				if p := recover(); p != nil && first == nil {
					first = p
				}
			}()
			c, done := ht.TraceHandler(ctx, call)
			if c != nil {
				ctx = c
			}
			if done != nil {
				dones = append(dones, done)
			}
		}()
	}
	// A member that panicked in TraceHandler is left out of this call; its panic is
	// re-raised by done, after the handler ran traced by the others and their done ran.
	done := func(err error) {
		pending := first
		for i := len(dones) - 1; i >= 0; i-- {
			func() {
				defer func() {
					if p := recover(); p != nil && pending == nil {
						pending = p
					}
				}()
				dones[i](err)
			}()
		}
		if pending != nil {
			panic(pending)
		}
	}
	return ctx, done
}
