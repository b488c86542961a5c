package watchtree

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/internal/wire"
)

// HandlerObserver is an optional interface of Config.Observer: when the Observer implements it,
// ObserveHandler is called after every handler call (each attempt, and each Replay) with the
// stream's name, how long the handler ran and its error (nil on success). It feeds latency
// histograms; the Prometheus adapter implements it.
//
// Unlike OnEvent it is called synchronously, on the lane goroutine that ran the handler,
// concurrently for different lanes and streams: it must be safe for concurrent use and must
// not block (an atomic histogram update is the expected cost). A panic in it is recovered and
// logged; it never fails the event. A MultiObserver passes it on to the members that implement
// it.
type HandlerObserver interface {
	// ObserveHandler reports one handler call of stream: its wall time and its result (nil,
	// or the error or recovered panic it ended with).
	ObserveHandler(stream string, took time.Duration, err error)
}

// ObserveHandler passes the call on to the members that implement HandlerObserver.
func (m multiObserver) ObserveHandler(stream string, took time.Duration, err error) {
	for _, o := range m {
		if ho, ok := o.(HandlerObserver); ok {
			ho.ObserveHandler(stream, took, err)
		}
	}
}

// handlerObserverOf returns o as a HandlerObserver when it (or a member of a MultiObserver)
// implements it, else nil.
func handlerObserverOf(o Observer) HandlerObserver {
	if m, ok := o.(multiObserver); ok {
		for _, x := range m {
			if handlerObserverOf(x) != nil {
				return m
			}
		}
		return nil
	}
	ho, _ := o.(HandlerObserver)
	return ho
}

// timedRouter times each handler call of the router it wraps for a HandlerObserver.
type timedRouter struct {
	dispatcher.Router
	stream string
	obs    HandlerObserver
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

// routerFor returns the stream's router, timed when Config.Observer is a HandlerObserver.
func (e *streamEntry) routerFor() dispatcher.Router {
	ho := handlerObserverOf(e.rt.cfg.Observer)
	if ho == nil {
		return e.cs.Router
	}
	return timedRouter{Router: e.cs.Router, stream: e.name, obs: ho, log: e.log, now: time.Now}
}
