package otel

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// TestCountersZeroAtAttach: as the Prometheus adapter's series, the counters of every stream of
// the attached runtime have points at 0 from Attach on, before any event; a stream spawned
// later has them from the next collection. Attach returns an error for nil and for a second
// runtime, as the Prometheus adapter's does.
func TestCountersZeroAtAttach(t *testing.T) {
	h := newHarness(t, Options{})
	t.Cleanup(func() { _ = h.tel.Close() })
	if err := h.tel.Attach(nil); err == nil {
		t.Error("Attach(nil) returned no error")
	}
	src := &statusSource{st: watchtree.StreamStatus{Name: "quiet", State: watchtree.StateRunning}}
	if err := h.tel.Attach(src); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := h.tel.Attach(src); err == nil {
		t.Error("a second Attach returned no error")
	}
	counters := []string{metricRetries, metricDeadLetters, metricDropped, metricDeadLetterFailed, metricSkipped, metricRestarts,
		metricCheckpoints, metricCheckpointFailed, metricCheckpointRefused, metricHistoryLost, metricGaps}
	check := func(stream string) {
		t.Helper()
		ps := h.collect(t)
		for _, name := range counters {
			if v, ok := value(ps, name, "watchtree.stream", stream); !ok || v != 0 {
				t.Errorf("%s{watchtree.stream=%s} = %v (present %v), want a point at 0", name, stream, v, ok)
			}
		}
		for _, kv := range [][]string{{"graceful", "false"}, {"crashed", "false"}, {"crashed", "true"}} {
			if v, ok := value(ps, metricStops, "watchtree.stream", stream, "watchtree.stop.reason", kv[0], "watchtree.terminal", kv[1]); !ok || v != 0 {
				t.Errorf("%s{%s, %v, terminal %s} = %v (present %v), want a point at 0", metricStops, stream, kv[0], kv[1], v, ok)
			}
		}
	}
	check("quiet")
	src.edit(func(st *watchtree.StreamStatus) { st.Name = "later" })
	check("later")
}

// TestScopeVersionIsWatchtreeVersion: the instrumentation scope of the spans and the metrics
// carries watchtree.Version(), the version the console and Prometheus's build_info report.
func TestScopeVersionIsWatchtreeVersion(t *testing.T) {
	h := newHarness(t, Options{})
	h.tel.OnEvent(observe.Checkpointed{Meta: observe.Meta{Stream: "s"}})
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) == 0 {
		t.Fatal("no scope metrics collected")
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Version != watchtree.Version() || sm.Scope.Version == "" {
			t.Errorf("scope %q version %q, want %q (watchtree.Version)", sm.Scope.Name, sm.Scope.Version, watchtree.Version())
		}
	}
}
