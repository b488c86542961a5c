package engine

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// tracedRouter wraps each handler call of the router it wraps in an observe.HandlerTracer's
// TraceHandler and done: the handler runs with the context the tracer returned.
type tracedRouter struct {
	dispatcher.Router
	stream string
	tr     observe.HandlerTracer
	log    *zap.Logger
}

func (r tracedRouter) Route(raw bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	inv, outcome, err := r.Router.Route(raw)
	if inv == nil || err != nil {
		return inv, outcome, err
	}
	return tracedInvocation{inv: inv, raw: raw, r: r}, outcome, nil
}

type tracedInvocation struct {
	inv dispatcher.Invocation
	raw bson.Raw
	r   tracedRouter
}

// Release passes the release on to the wrapped invocation.
func (t tracedInvocation) Release() {
	if r, ok := t.inv.(dispatcher.Releaser); ok {
		r.Release()
	}
}

// Call runs the handler inside the tracer's call. A handler that panics or calls
// runtime.Goexit unwinds through the deferred done, which then reports ErrHandlerAborted.
func (t tracedInvocation) Call(ctx context.Context, attempt int) (err error) {
	hctx, done := t.r.start(ctx, t.call(attempt))
	returned := false
	defer func() {
		if !returned {
			t.r.end(done, observe.ErrHandlerAborted)
		}
	}()
	err = t.inv.Call(hctx, attempt)
	returned = true
	t.r.end(done, err)
	return err
}

// call describes the call from the raw event, leniently: a field that does not read is empty.
func (t tracedInvocation) call(attempt int) observe.HandlerCall {
	doc := bsoncore.Document(t.raw)
	c := observe.HandlerCall{Stream: t.r.stream, Attempt: attempt, Raw: t.raw}
	if v, err := doc.LookupErr("_id", "_data"); err == nil {
		c.EventID, _ = v.StringValueOK()
	}
	if v, err := doc.LookupErr("operationType"); err == nil {
		c.OperationType, _ = v.StringValueOK()
	}
	if v, err := doc.LookupErr("ns"); err == nil {
		if ns, ok := v.DocumentOK(); ok {
			db, _ := ns.Lookup("db").StringValueOK()
			coll, _ := ns.Lookup("coll").StringValueOK()
			c.Namespace = db
			if coll != "" {
				c.Namespace += "." + coll
			}
		}
	}
	return c
}

// start calls TraceHandler; after a panic of the tracer the handler runs with ctx, untraced.
func (r tracedRouter) start(ctx context.Context, call observe.HandlerCall) (hctx context.Context, done func(error)) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("HandlerTracer panicked", zap.String("stream", r.stream), zap.Any("panic", p))
			hctx, done = ctx, nil
		}
	}()
	hctx, done = r.tr.TraceHandler(ctx, call)
	if hctx == nil {
		hctx = ctx
	}
	return hctx, done
}

func (r tracedRouter) end(done func(error), err error) {
	if done == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("HandlerTracer's done panicked", zap.String("stream", r.stream), zap.Any("panic", p))
		}
	}()
	done(err)
}
