package otel

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe/observetest"
)

// ended returns the ended spans named name.
func (h *harness) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// TestSpansAndMetricsAfterARetryADeadLetterARestartAndALeaderChange runs observetest's scenario
// with the adapter: order 1 (written inside a traced request) fails once, order 2 always fails
// and is dead-lettered, a getMore fails so that the stream restarts, and a SingleLeader stream
// acquires and then releases its lease. It checks the spans (names, attributes, parents, links)
// and the metrics.
func TestSpansAndMetricsAfterARetryADeadLetterARestartAndALeaderChange(t *testing.T) {
	h := newHarness(t, Options{TraceparentField: "traceparent"})

	// The writer's request span, and its traceparent as the document carries it.
	wctx, writer := h.tel.opts.TracerProvider.Tracer("writer").Start(context.Background(), "POST /pay")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(wctx, carrier)
	writer.End()

	var mu sync.Mutex
	handlerSpans := map[string]trace.SpanID{} // "id#attempt": the span in the handler's context
	sc := observetest.Run(t, observetest.Options{Observer: h.tel, InstanceID: "otel-test-1",
		Traceparent: carrier.Get("traceparent"),
		Attach: func(rt *watchtree.Runtime) error {
			t.Cleanup(func() { _ = h.tel.Close() })
			return h.tel.Attach(rt)
		},
		OnHandle: func(ctx context.Context, ev *watchtree.Event[observetest.Order]) {
			mu.Lock()
			defer mu.Unlock()
			handlerSpans[fmt.Sprintf("%d#%d", ev.FullDocument.ID, ev.Attempt())] = trace.SpanContextFromContext(ctx).SpanID()
		}})
	observetest.WaitFor(t, "the restart span", func() bool { return len(h.ended("restart pay")) == 1 })
	observetest.WaitFor(t, "the lease acquired and released", func() bool { return len(h.ended("lease lead")) == 2 })

	// Process spans, by event and attempt.
	writerSC := writer.SpanContext()
	type key struct {
		doc     int64
		attempt int
	}
	process := map[key]sdktrace.ReadOnlySpan{}
	ids := map[int64]string{}
	for _, s := range h.ended("process pay") {
		a := attrsOf(s.Attributes())
		if s.SpanKind() != trace.SpanKindConsumer || a["messaging.system"] != "mongodb" || a["messaging.operation.type"] != "process" ||
			a["messaging.destination.name"] != sc.Database+".pay" || a["watchtree.stream"] != "pay" ||
			a["watchtree.operation_type"] != "insert" || a["messaging.message.id"] == "" {
			t.Errorf("process span attributes %v (kind %v)", a, s.SpanKind())
		}
		var doc int64
		var attempt int
		fmt.Sscan(a["watchtree.attempt"], &attempt)
		mu.Lock()
		for k, id := range handlerSpans {
			if id == s.SpanContext().SpanID() {
				fmt.Sscanf(k, "%d#", &doc)
			}
		}
		mu.Unlock()
		if doc == 0 {
			t.Fatalf("process span %v (attempt %d) is not the span of any handler's context", s.SpanContext().SpanID(), attempt)
		}
		process[key{doc, attempt}] = s
		ids[doc] = a["messaging.message.id"]
	}
	if len(process) != 4 {
		t.Fatalf("%d process spans, want 4 (order 1 twice, order 2 twice): %v", len(process), process)
	}
	linked := func(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
				return true
			}
		}
		return false
	}
	for k, s := range process {
		failed := k.doc == 2 || k.attempt == 1
		if got := s.Status().Code == codes.Error; got != failed {
			t.Errorf("order %d attempt %d: status %v, want error %v", k.doc, k.attempt, s.Status(), failed)
		}
		if failed && attrsOf(s.Attributes())["error.type"] == "" {
			t.Errorf("order %d attempt %d failed without error.type", k.doc, k.attempt)
		}
		if got := linked(s, writerSC); got != (k.doc == 1) {
			t.Errorf("order %d attempt %d: linked to the writer %v, want %v", k.doc, k.attempt, got, k.doc == 1)
		}
		if s.Parent().IsValid() {
			t.Errorf("order %d attempt %d has parent %v: a process span is a root, linked to its writer", k.doc, k.attempt, s.Parent())
		}
		if k.attempt == 2 && !linked(s, process[key{k.doc, 1}].SpanContext()) {
			t.Errorf("order %d attempt 2 does not link to attempt 1", k.doc)
		}
	}

	// The dead-letter span is a child of order 2's last attempt.
	dls := h.ended("dead-letter pay")
	if len(dls) != 1 {
		t.Fatalf("%d dead-letter spans", len(dls))
	}
	dl, last := dls[0], process[key{2, 2}].SpanContext()
	if dl.Parent().SpanID() != last.SpanID() || dl.SpanContext().TraceID() != last.TraceID() {
		t.Errorf("the dead-letter span's parent is %v, want order 2's last attempt %v", dl.Parent().SpanID(), last.SpanID())
	}
	if a := attrsOf(dl.Attributes()); a["messaging.message.id"] != ids[2] || a["watchtree.attempts"] != "2" ||
		a["watchtree.dead_letter.written"] != "true" || a["watchtree.dead_letter.dropped"] != "false" {
		t.Errorf("dead-letter span attributes %v", a)
	}

	// The restart span: from the crash to the restart.
	rs := h.ended("restart pay")[0]
	if a := attrsOf(rs.Attributes()); a["watchtree.attempt"] != "1" || a["watchtree.outcome"] != "restarted" || a["watchtree.cause"] == "" {
		t.Errorf("restart span attributes %v", a)
	}
	if rs.Status().Code != codes.Ok || rs.EndTime().Before(rs.StartTime()) {
		t.Errorf("restart span status %v, %v to %v", rs.Status(), rs.StartTime(), rs.EndTime())
	}

	// The lease spans: acquired, then released.
	var changes []string
	for _, s := range h.ended("lease lead") {
		a := attrsOf(s.Attributes())
		changes = append(changes, a["watchtree.lease.change"]+"/"+a["watchtree.lease.leader"]+"/"+a["watchtree.instance"])
	}
	if fmt.Sprint(changes) != "[acquired/true/otel-test-1 released/false/otel-test-1]" {
		t.Errorf("lease spans %v", changes)
	}

	// The metrics.
	ps := h.collect(t)
	exact := []struct {
		name string
		kv   []string
		want float64
	}{
		{metricProcessDuration, []string{"watchtree.stream", "pay"}, 4},
		{metricProcessDuration, []string{"watchtree.stream", "pay", "error.type", "*errors.errorString"}, 3},
		{metricRetries, []string{"watchtree.stream", "pay"}, 2}, // order 1's first attempt, order 2's first attempt
		{metricDeadLetters, []string{"watchtree.stream", "pay"}, 1},
		{metricRestarts, []string{"watchtree.stream", "pay"}, 1},
		{metricStops, []string{"watchtree.stream", "pay", "watchtree.stop.reason", "crashed", "watchtree.terminal", "false"}, 1},
		{metricLeadership, []string{"watchtree.stream", "lead", "watchtree.lease.change", "acquired"}, 1},
		{metricLeadership, []string{"watchtree.stream", "lead", "watchtree.lease.change", "released"}, 1},
		{metricConsumed, []string{"watchtree.stream", "pay", "watchtree.outcome", "handled"}, 1},
		{metricConsumed, []string{"watchtree.stream", "pay", "watchtree.outcome", "dead_lettered"}, 1},
		{metricConsumed, []string{"watchtree.stream", "pay", "watchtree.outcome", "filtered"}, 0},
		{metricState, []string{"watchtree.stream", "pay", "watchtree.state", "running"}, 1},
		{metricState, []string{"watchtree.stream", "pay", "watchtree.state", "crashed"}, 0},
		{metricRole, []string{"watchtree.stream", "pay", "watchtree.role", "all-instances"}, 1},
		{metricRestartAttempt, []string{"watchtree.stream", "pay"}, 0},
		{metricInFlight, []string{"watchtree.stream", "pay"}, 0},
		{metricBacklog, []string{"watchtree.stream", "pay"}, 1},
		{metricObserverDropped, nil, 0},
	}
	for _, c := range exact {
		if got, ok := value(ps, c.name, c.kv...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.kv, got, ok, c.want)
		}
	}
	for _, name := range []string{metricCheckpoints, metricLag, metricCheckpointAge} {
		if v, ok := value(ps, name, "watchtree.stream", "pay"); !ok || v < 0 || (name == metricCheckpoints && v < 1) {
			t.Errorf("%s = %v (present %v)", name, v, ok)
		}
	}
	_, _, oerr := sc.Runtime.OplogWindow(context.Background())
	if _, ok := value(ps, metricHeadroom, "watchtree.stream", "pay"); ok != (oerr == nil) {
		t.Errorf("token headroom present %v, but the oplog window read returned %v", ok, oerr)
	}
}
