// Package otel exports a watchtree runtime's telemetry to OpenTelemetry: a span per handler
// call and spans for the stream's lifecycle (trace API go.opentelemetry.io/otel/trace), and
// metrics with the meaning of the Prometheus adapter's (metric API go.opentelemetry.io/otel/metric).
// It is fed by the same Observer events as metrics/prometheus.
//
// A Telemetry value is an observe.Observer and an observe.HandlerTracer: set it as
// Config.Observer (or in an observe.Multi beside the Prometheus adapter):
//
//	tel, err := otel.New(otel.Options{TracerProvider: tp, MeterProvider: mp, TraceparentField: "traceparent"})
//	rt, _ := watchtree.New(watchtree.Config{..., Observer: tel})
//	if err := tel.Attach(rt); err != nil { // the gauges read the runtime's state at each collection
//		return err
//	}
//	defer tel.Close()
//
// Spans (every span has watchtree.stream):
//
//   - "process <stream>", kind consumer, around every handler call (each attempt, each Replay),
//     following the messaging semantic conventions: messaging.system "mongodb",
//     messaging.operation.type and messaging.operation.name "process",
//     messaging.destination.name the event's namespace ("db.collection"), messaging.message.id
//     the event's ID, watchtree.attempt the 1-based attempt and watchtree.operation_type the
//     change's operation type. The handler's context carries it, so spans the handler starts are
//     its children. A failed call records the error and sets status Error and error.type. A
//     retry links to the failed attempt before it. With Options.TraceparentField set, a
//     document carrying a W3C traceparent in that field links the span to the writer's span.
//   - "dead-letter <stream>" for a dead-letter write (written, dropped or failed), a child of
//     the event's last process span, from the end of that attempt to the write.
//   - "restart <stream>" from a crash to the successful restart (status Error when the crash
//     was terminal: nothing restarts it); a failed restart attempt is a span event.
//   - "lease <stream>" for each leadership change of a SingleLeader stream (instantaneous).
//   - "snapshot <stream>" from a snapshot's start (or resumption) to its end, with a child
//     "snapshot chunk <stream>" per chunk of an on-demand snapshot and a span event per
//     progress report of the initial one (which reports every second, not per chunk).
//
// The metrics are listed in the README's Observability section; the kinds of observe events
// that feed no span and no metric are listed, with the reason, in notExported.
package otel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/watchtree/watchtree"

	"github.com/watchtree/watchtree/observe"
)

// instrumentation is the tracer's and the meter's instrumentation scope name.
const instrumentation = "github.com/watchtree/watchtree/otel"

// Source is what a metric collection reads; *watchtree.Runtime is one.
type Source interface {
	// Streams returns the status of every stream (the gauges and consumed messages); an error
	// leaves them out of the collection.
	Streams(ctx context.Context) ([]watchtree.StreamStatus, error)
	// CountDeadLetters returns the number of dead letters of stream (the backlog gauge).
	CountDeadLetters(ctx context.Context, stream string) (int, error)
	// OplogWindow returns the wall times of the oldest and newest oplog entries (token
	// headroom); an error, e.g. an oplog the client may not read, leaves that gauge out.
	OplogWindow(ctx context.Context) (oldest, newest time.Time, err error)
	// ObserverStats returns the Observer queue's counts (watchtree.observer.dropped).
	ObserverStats() watchtree.ObserverStats
}

// Options configure New. The zero value means the defaults.
type Options struct {
	// TracerProvider makes the tracer. Default the global one (otel.GetTracerProvider()).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Default the global one (otel.GetMeterProvider()).
	MeterProvider metric.MeterProvider
	// TraceparentField is the document field holding the writer's W3C traceparent
	// ("00-<trace id>-<span id>-<flags>"); a dotted name reads a nested field. It is read from
	// the change's fullDocument, else from an update's updatedFields. Empty (the default):
	// no document is read and no process span links to a writer.
	TraceparentField string
	// Buckets are messaging.process.duration's bucket boundaries, in seconds. Default the
	// Prometheus adapter's: from 1ms to about 10s (0.001 × 2.5^i, i = 0..10).
	Buckets []float64
	// CollectTimeout bounds the runtime reads of one metric collection. Default 5s.
	CollectTimeout time.Duration
	// MaxPending bounds how many events' last failed attempt are remembered, for the retry
	// link and the dead-letter span's parent. Beyond it the oldest are forgotten (their later
	// spans then have no link or parent). Default 4096.
	MaxPending int
}

// Telemetry is the adapter; see the package documentation. It is safe for concurrent use.
type Telemetry struct {
	opts   Options
	tracer trace.Tracer
	field  []string // TraceparentField, split at the dots
	inst   instruments
	reg    metric.Registration
	cpAges *watchtree.CheckpointAges // watchtree.checkpoint.age, defined once for both adapters

	mu  sync.Mutex
	src Source
	// known are the streams whose counters have their points at 0 (zero).
	known map[string]bool
	// failed is the last failed attempt of each event not yet settled (key stream, event ID),
	// oldest first in order.
	failed map[pendingKey]attemptEnd
	order  []pendingRef
	seq    uint64
	// restarts are the open restart spans, snapshots the open snapshot spans, by stream.
	restarts  map[string]trace.Span
	snapshots map[string]map[string]*snapshotSpan
}

var (
	_ observe.Observer      = (*Telemetry)(nil)
	_ observe.HandlerTracer = (*Telemetry)(nil)
)

// New returns the adapter, with its instruments made on the MeterProvider. Attach the runtime
// for the gauges; the spans and the event counters work without it. Errors: the meter's, when
// an instrument or the collection callback cannot be made.
func New(o Options) (*Telemetry, error) {
	if o.TracerProvider == nil {
		o.TracerProvider = gotel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = gotel.GetMeterProvider()
	}
	if len(o.Buckets) == 0 {
		o.Buckets = defaultBuckets()
	}
	if o.CollectTimeout <= 0 {
		o.CollectTimeout = 5 * time.Second
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 4096
	}
	t := &Telemetry{
		opts:      o,
		tracer:    o.TracerProvider.Tracer(instrumentation, trace.WithInstrumentationVersion(watchtree.Version())),
		field:     splitField(o.TraceparentField),
		failed:    map[pendingKey]attemptEnd{},
		restarts:  map[string]trace.Span{},
		snapshots: map[string]map[string]*snapshotSpan{},
		cpAges:    watchtree.NewCheckpointAges(),
		known:     map[string]bool{},
	}
	meter := o.MeterProvider.Meter(instrumentation, metric.WithInstrumentationVersion(watchtree.Version()))
	if err := t.inst.make(meter, o.Buckets); err != nil {
		return nil, fmt.Errorf("watchtree/otel: %w", err)
	}
	reg, err := meter.RegisterCallback(t.collect, t.inst.observables()...)
	if err != nil {
		return nil, fmt.Errorf("watchtree/otel: register the collection callback: %w", err)
	}
	t.reg = reg
	return t, nil
}

// errAttached is Attach's error when the Telemetry already reads a runtime.
var errAttached = errors.New("watchtree/otel: Attach: a runtime is already attached")

// Attach sets the runtime the metric collections read, and gives the counters of each of its
// streams their points at 0 (as the Prometheus adapter's series exist at 0), so a rate or an
// alert on them has a series before the first event; a stream spawned later gets them at its
// first event or the next collection, whichever comes first. It returns an error for a nil
// src, and when t already reads one (as the Prometheus adapter's Attach does).
func (t *Telemetry) Attach(src Source) error {
	if src == nil {
		return errors.New("watchtree/otel: Attach(nil): give the runtime to read")
	}
	t.mu.Lock()
	if t.src != nil {
		t.mu.Unlock()
		return errAttached
	}
	t.src = src
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.CollectTimeout)
	defer cancel()
	sts, _ := src.Streams(ctx) // a runtime not started yet has none: its streams get theirs later
	for _, st := range sts {
		t.zero(st.Name)
	}
	return nil
}

// Close unregisters the collection callback and ends the spans still open (restarts and
// snapshots under way), with status unset. The Telemetry must not be used afterwards.
func (t *Telemetry) Close() error {
	t.mu.Lock()
	for s, sp := range t.restarts {
		sp.End()
		delete(t.restarts, s)
	}
	for s, m := range t.snapshots {
		for _, ss := range m {
			ss.span.End()
		}
		delete(t.snapshots, s)
	}
	t.mu.Unlock()
	return errors.Join(t.reg.Unregister())
}

// OnEvent implements observe.Observer: it counts the event and starts, annotates or ends the
// spans it concerns (notExported lists the kinds it ignores).
func (t *Telemetry) OnEvent(ev observe.Event) {
	t.count(ev)
	t.span(ev)
}
