package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

type ctxKey struct{}

// fakeRouter routes every event to call, which sees the handler's context.
type fakeRouter struct {
	call func(ctx context.Context, attempt int) error
}

func (r fakeRouter) Route(bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	return fakeInvocation(r.call), messages.Outcome_OUTCOME_UNSPECIFIED, nil
}

func (fakeRouter) Classify(error) (dispatcher.ErrorClass, string) { return dispatcher.Retryable, "" }

type fakeInvocation func(ctx context.Context, attempt int) error

func (f fakeInvocation) Call(ctx context.Context, attempt int) error { return f(ctx, attempt) }

// recTracer records the calls and results, and puts the call's attempt in the context.
type recTracer struct {
	observe.Nop
	mu      sync.Mutex
	calls   []observe.HandlerCall
	results []error
	panicIn string // "start" or "done": TraceHandler or done panics
}

func (r *recTracer) TraceHandler(ctx context.Context, c observe.HandlerCall) (context.Context, func(error)) {
	if r.panicIn == "start" {
		panic("tracer start")
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return context.WithValue(ctx, ctxKey{}, c.Attempt), func(err error) {
		r.mu.Lock()
		r.results = append(r.results, err)
		r.mu.Unlock()
		if r.panicIn == "done" {
			panic("tracer done")
		}
	}
}

func changeEvent(t *testing.T) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "82ABC"}}},
		{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestTracedRouterDescribesTheCallAndPassesTheContext: the tracer sees the stream, event ID,
// namespace, operation type, attempt and raw event; the handler runs with the tracer's
// context; done gets the handler's result.
func TestTracedRouterDescribesTheCallAndPassesTheContext(t *testing.T) {
	tr := &recTracer{}
	boom := errors.New("boom")
	var seen []any
	r := tracedRouter{Router: fakeRouter{call: func(ctx context.Context, attempt int) error {
		seen = append(seen, ctx.Value(ctxKey{}))
		if attempt == 1 {
			return boom
		}
		return nil
	}}, stream: "orders", tr: tr, log: zap.NewNop()}
	raw := changeEvent(t)
	inv, _, err := r.Route(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Call(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("attempt 1 returned %v", err)
	}
	if err := inv.Call(context.Background(), 2); err != nil {
		t.Fatalf("attempt 2 returned %v", err)
	}
	if fmt.Sprint(seen) != "[1 2]" {
		t.Errorf("the handler saw the tracer's context values %v, want [1 2]", seen)
	}
	if len(tr.calls) != 2 {
		t.Fatalf("%d calls", len(tr.calls))
	}
	c := tr.calls[1]
	if c.Stream != "orders" || c.EventID != "82ABC" || c.Namespace != "shop.orders" || c.OperationType != "insert" ||
		c.Attempt != 2 || string(c.Raw) != string(raw) {
		t.Errorf("call = %+v", c)
	}
	if len(tr.results) != 2 || !errors.Is(tr.results[0], boom) || tr.results[1] != nil {
		t.Errorf("results = %v", tr.results)
	}
}

// TestTracedRouterEndsAbortedCalls: a handler that panics or calls runtime.Goexit still ends
// the tracer's call, with ErrHandlerAborted, and the panic reaches the dispatcher.
func TestTracedRouterEndsAbortedCalls(t *testing.T) {
	for _, how := range []string{"panic", "goexit"} {
		t.Run(how, func(t *testing.T) {
			tr := &recTracer{}
			r := tracedRouter{Router: fakeRouter{call: func(context.Context, int) error {
				if how == "panic" {
					panic("handler")
				}
				runtime.Goexit()
				return nil
			}}, stream: "orders", tr: tr, log: zap.NewNop()}
			inv, _, _ := r.Route(changeEvent(t))
			var recovered any
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { recovered = recover() }()
				_ = inv.Call(context.Background(), 1)
			}()
			<-done
			if how == "panic" && recovered != "handler" {
				t.Errorf("recovered %v, want the handler's panic", recovered)
			}
			if len(tr.results) != 1 || !errors.Is(tr.results[0], observe.ErrHandlerAborted) {
				t.Errorf("results = %v, want [ErrHandlerAborted]", tr.results)
			}
		})
	}
}

// TestTracedRouterSurvivesATracerPanic: a panicking TraceHandler or done is logged; the handler
// runs (untraced after a start panic) and its result is returned.
func TestTracedRouterSurvivesATracerPanic(t *testing.T) {
	for _, where := range []string{"start", "done"} {
		t.Run(where, func(t *testing.T) {
			tr := &recTracer{panicIn: where}
			calls := 0
			core, logs := observer.New(zap.ErrorLevel)
			r := tracedRouter{Router: fakeRouter{call: func(context.Context, int) error {
				calls++
				return nil
			}}, stream: "orders", tr: tr, log: zap.New(core)}
			inv, _, _ := r.Route(changeEvent(t))
			if err := inv.Call(context.Background(), 1); err != nil || calls != 1 {
				t.Fatalf("Call = %v after %d handler calls", err, calls)
			}
			if logs.FilterMessageSnippet("HandlerTracer").Len() != 1 {
				t.Errorf("the panic was not logged once: %v", logs.All())
			}
		})
	}
}
