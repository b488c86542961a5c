package watchtree

import (
	"context"

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

// Route implements dispatcher.Router: peek the operation type, pick the handler, decode once,
// filter. Panics of the Filter propagate to the dispatcher.
func (r *router[T]) Route(raw bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	op, ok := peekOperationType(raw)
	if ok && r.handlerFor(op) == nil {
		return nil, messages.Outcome_OUTCOME_UNHANDLED, nil
	}
	inv := &invocation[T]{}
	if err := fillEvent(&inv.buf, raw, r.stream, 0, &r.ns); err != nil {
		return nil, messages.Outcome_OUTCOME_UNSPECIFIED, err
	}
	inv.handler = r.handlerFor(inv.buf.ev.op)
	if inv.handler == nil { // unreachable: fillEvent found the same operationType
		return nil, messages.Outcome_OUTCOME_UNHANDLED, nil
	}
	if r.filter != nil && !r.filter(&inv.buf.ev) {
		return nil, messages.Outcome_OUTCOME_FILTERED, nil
	}
	return inv, messages.Outcome_OUTCOME_UNSPECIFIED, nil
}

// Classify implements dispatcher.Router: Skip wins over Permanent, which wins over Retryable.
func (r *router[T]) Classify(err error) dispatcher.ErrorClass {
	return classify(err)
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

// invocation is one routed event bound to its handler; the invocation, the event and its
// documents share one allocation.
type invocation[T any] struct {
	buf     eventBuf[T]
	handler Handler[T]
}

// Call implements dispatcher.Invocation. It does not recover panics.
func (i *invocation[T]) Call(ctx context.Context, attempt int) error {
	i.buf.ev.attempt = attempt
	return i.handler(ctx, &i.buf.ev)
}
