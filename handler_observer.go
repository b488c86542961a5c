package watchtree

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/observe"
)

// timedRouter times each handler call of the router it wraps for a HandlerObserver.
type timedRouter struct {
	dispatcher.Router
	stream string
	obs    observe.HandlerObserver
	log    *zap.Logger
	now    func() time.Time
}

func (r timedRouter) Route(raw bson.Raw) (dispatcher.Invocation, wire.Outcome, error) {
	inv, outcome, err := r.Router.Route(raw)
	if inv == nil || err != nil {
		return inv, outcome, err
	}
	return timedInvocation{inv: inv, r: r}, outcome, nil
}

type timedInvocation struct {
	inv dispatcher.Invocation
	r   timedRouter
}

// Call times the handler; a panicking handler is not timed (the dispatcher recovers it).
// Release passes the release on to the wrapped invocation.
func (t timedInvocation) Release() {
	if r, ok := t.inv.(dispatcher.Releaser); ok {
		r.Release()
	}
}

func (t timedInvocation) Call(ctx context.Context, attempt int) error {
	start := t.r.now()
	err := t.inv.Call(ctx, attempt)
	t.r.observe(t.r.now().Sub(start), err)
	return err
}

func (r timedRouter) observe(took time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("HandlerObserver panicked", zap.String("stream", r.stream), zap.Any("panic", p))
		}
	}()
	r.obs.ObserveHandler(r.stream, took, err)
}

// routerFor returns the stream's router, timed when Config.Observer is an
// observe.HandlerObserver (observe.Multi is one exactly when a member is).
func (e *streamEntry) routerFor() dispatcher.Router {
	ho, ok := e.rt.cfg.Observer.(observe.HandlerObserver)
	if !ok {
		return e.cs.Router
	}
	return timedRouter{Router: e.cs.Router, stream: e.name, obs: ho, log: e.log, now: time.Now}
}
