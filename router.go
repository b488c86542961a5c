package watchtree

import (
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/messages"
)

// router is the dispatcher.Router of a Stream[T]: the one place where the dispatcher's raw
// events meet the user's type. It is immutable after construction, so lanes share it safely.
type router[T any] struct {
	stream    string
	filter    func(*Event[T]) bool
	onInsert  Handler[T]
	onUpdate  Handler[T]
	onReplace Handler[T]
	onDelete  Handler[T]
	onChange  Handler[T]
	onSnap    Handler[T]
	ns        nsCache
	pool      sync.Pool // of *invocation[T]
}

var _ dispatcher.Router = (*router[bson.Raw])(nil)

func newRouter[T any](s Stream[T]) *router[T] {
	return &router[T]{
		stream:    s.Name,
		filter:    s.Filter,
		onInsert:  s.OnInsert,
		onUpdate:  s.OnUpdate,
		onReplace: s.OnReplace,
		onDelete:  s.OnDelete,
		onChange:  s.OnChange,
		onSnap:    s.OnSnapshot,
	}
}

// handles reports whether an event of operation type op has a handler.
func (r *router[T]) handles(op OperationType) bool { return r.handlerFor(op) != nil }

// handlerFor returns the typed handler of op, else OnChange, else nil.
func (r *router[T]) handlerFor(op OperationType) Handler[T] {
	var h Handler[T]
	switch op {
	case OpInsert:
		h = r.onInsert
	case OpUpdate:
		h = r.onUpdate
	case OpReplace:
		h = r.onReplace
	case OpDelete:
		h = r.onDelete
	case OpSnapshot:
		h = r.onSnap
	}
	if h == nil {
		h = r.onChange
	}
	return h
}

// Route implements dispatcher.Router: decode the event in one walk, which stops at the
// operation type when no handler takes it (unhandled, nothing else decoded), then filter.
// Panics of the Filter propagate to the dispatcher.
func (r *router[T]) Route(raw bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	inv, _ := r.pool.Get().(*invocation[T])
	if inv == nil {
		inv = &invocation[T]{pool: &r.pool}
	}
	if err := fillEvent(&inv.ev, raw, r.stream, 0, &r.ns, r.handles); err != nil {
		inv.Release()
		if err == errNotWanted {
			return nil, messages.Outcome_OUTCOME_UNHANDLED, nil
		}
		return nil, messages.Outcome_OUTCOME_UNSPECIFIED, err
	}
	inv.handler = r.handlerFor(inv.ev.op)
	if inv.handler == nil { // unreachable: fillEvent found the same operationType
		inv.Release()
		return nil, messages.Outcome_OUTCOME_UNHANDLED, nil
	}
	if r.filter != nil && !r.filter(&inv.ev) {
		inv.Release()
		return nil, messages.Outcome_OUTCOME_FILTERED, nil
	}
	return inv, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}

// Classify implements dispatcher.Router: Skip wins over Permanent, which wins over Retryable.
// A skip's detail is the reason given to Skip, read from the error's own value (never from its
// text, which wrapping changes).
func (r *router[T]) Classify(err error) (dispatcher.ErrorClass, string) {
	class := classify(err)
	if class != dispatcher.Skipped {
		return class, ""
	}
	reason, _ := skipReason(err)
	return class, reason
}

func classify(err error) dispatcher.ErrorClass {
	switch {
	case IsSkip(err):
		return dispatcher.Skipped
	case IsPermanent(err):
		return dispatcher.Permanent
	}
	return dispatcher.Retryable
}

// invocation is one routed event bound to its handler. Invocations are reused through the
// router's pool: the dispatcher releases one once its event has settled. Only the Event struct
// is reused; the documents it points to (FullDocument, FullDocumentBeforeChange,
// UpdateDescription) are allocated per event, so a handler may keep them after it returns.
type invocation[T any] struct {
	ev      Event[T]
	handler Handler[T]
	pool    *sync.Pool
}

// Call implements dispatcher.Invocation. It does not recover panics.
func (i *invocation[T]) Call(ctx context.Context, attempt int) error {
	i.ev.attempt = attempt
	return i.handler(ctx, &i.ev)
}

// Release implements dispatcher.Releaser: the event is cleared (so that the pool keeps no
// event bytes alive) and the invocation goes back to the pool.
func (i *invocation[T]) Release() {
	i.ev, i.handler = Event[T]{}, nil
	i.pool.Put(i)
}
