package otel

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/watchtree/watchtree/observe"
)

// BenchmarkTraceHandler is the adapter's cost per handler call: TraceHandler and done, one
// call in ten failing (a retry), with a traceparent to read. sdk: the OpenTelemetry SDK records
// the span (sampled, no exporter) and the histogram; noop (the baseline): the no-op providers,
// so only the adapter's own work (attributes, the traceparent lookup, the bookkeeping of failed
// attempts) is left.
func BenchmarkTraceHandler(b *testing.B) {
	raw, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82AB"}}},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}, {Key: "traceparent", Value: tp}}}})
	if err != nil {
		b.Fatal(err)
	}
	boom := errors.New("boom")
	run := func(b *testing.B, o Options) {
		o.TraceparentField = "traceparent"
		tel, err := New(o)
		if err != nil {
			b.Fatal(err)
		}
		defer tel.Close()
		call := observe.HandlerCall{Stream: "orders", EventID: "82AB", Namespace: "shop.orders", OperationType: "insert", Raw: raw}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			call.Attempt = 1 + i%10
			_, done := tel.TraceHandler(context.Background(), call)
			if i%10 == 0 {
				done(boom)
			} else {
				done(nil)
			}
		}
	}
	b.Run("sdk", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer tp.Shutdown(context.Background())
		defer mp.Shutdown(context.Background())
		run(b, Options{TracerProvider: tp, MeterProvider: mp})
	})
	b.Run("noop", func(b *testing.B) {
		run(b, Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	})
}
