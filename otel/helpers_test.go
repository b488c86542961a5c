package otel

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// harness is a Telemetry on SDK providers whose spans and metrics the test reads.
type harness struct {
	tel    *Telemetry
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	o.TracerProvider, o.MeterProvider = tp, mp
	tel, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.tel = tel
	return h
}

// point is one data point: its metric, attributes and value (a histogram's: its count).
type point struct {
	name  string
	attrs attribute.Set
	value float64
}

func (p point) String() string {
	return fmt.Sprintf("%s{%s} %v", p.name, p.attrs.Encoded(attribute.DefaultEncoder()), p.value)
}

// collect reads every data point now.
func (h *harness) collect(t *testing.T) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, float64(dp.Value)})
				}
			case metricdata.Sum[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, dp.Value})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, float64(dp.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, float64(dp.Count)})
				}
			default:
				t.Fatalf("metric %s has data of type %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// render is the points as sorted lines, to compare two collections.
func render(ps []point) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// value is the sum of the values of name's points whose attributes include kv (key, value
// pairs); ok is false when there is none.
func value(ps []point, name string, kv ...string) (v float64, ok bool) {
next:
	for _, p := range ps {
		if p.name != name {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			got, has := p.attrs.Value(attribute.Key(kv[i]))
			if !has || got.String() != kv[i+1] {
				continue next
			}
		}
		v, ok = v+p.value, true
	}
	return v, ok
}

// attrsOf is a span's attributes by key, rendered with String.
func attrsOf(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}
