package otel

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/watchtree/watchtree/observe"
)

// The attributes watchtree adds to the semantic conventions' ones.
const (
	attrStream        = attribute.Key("watchtree.stream")
	attrAttempt       = attribute.Key("watchtree.attempt")
	attrOperationType = attribute.Key("watchtree.operation_type")
	attrAttempts      = attribute.Key("watchtree.attempts")
	attrDropped       = attribute.Key("watchtree.dead_letter.dropped")
	attrWritten       = attribute.Key("watchtree.dead_letter.written")
	attrCause         = attribute.Key("watchtree.cause")
	attrTerminal      = attribute.Key("watchtree.terminal")
	attrRestartIn     = attribute.Key("watchtree.restart_in_seconds")
	attrChange        = attribute.Key("watchtree.lease.change")
	attrLeader        = attribute.Key("watchtree.lease.leader")
	attrEpoch         = attribute.Key("watchtree.lease.epoch")
	attrOwner         = attribute.Key("watchtree.lease.owner")
	attrInstance      = attribute.Key("watchtree.instance")
	attrWhy           = attribute.Key("watchtree.lease.why")
	attrSnapshotID    = attribute.Key("watchtree.snapshot.id")
	attrReason        = attribute.Key("watchtree.snapshot.reason")
	attrResumed       = attribute.Key("watchtree.snapshot.resumed")
	attrPhase         = attribute.Key("watchtree.snapshot.phase")
	attrDocuments     = attribute.Key("watchtree.snapshot.documents")
	attrRangesDone    = attribute.Key("watchtree.snapshot.ranges_done")
	attrRangesTotal   = attribute.Key("watchtree.snapshot.ranges_total")
	attrChunks        = attribute.Key("watchtree.snapshot.chunks_done")
	attrSnapDead      = attribute.Key("watchtree.snapshot.dead_lettered")
	attrAtRisk        = attribute.Key("watchtree.snapshot.at_risk")
)

// messagingMongoDB is messaging.system's value: the conventions list no MongoDB, and allow a
// system of its own name.
var messagingMongoDB = semconv.MessagingSystemKey.String("mongodb")

// pendingKey names one event of one stream.
type pendingKey struct{ stream, id string }

// attemptEnd is an event's last failed attempt: its span and when it ended; seq orders the
// remembered attempts.
type attemptEnd struct {
	span trace.SpanContext
	end  time.Time
	seq  uint64
}

// pendingRef is an entry of the remembered attempts' order: current while the map holds the
// same seq for its key.
type pendingRef struct {
	key pendingKey
	seq uint64
}

// TraceHandler implements observe.HandlerTracer: it starts the call's process span, which the
// handler's context carries, and returns the function that ends it and records
// messaging.process.duration.
func (t *Telemetry) TraceHandler(ctx context.Context, c observe.HandlerCall) (context.Context, func(error)) {
	attrs := []attribute.KeyValue{
		messagingMongoDB,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(c.Namespace),
		semconv.MessagingMessageID(c.EventID),
		attrStream.String(c.Stream),
		attrAttempt.Int(c.Attempt),
		attrOperationType.String(c.OperationType),
	}
	var links []trace.Link
	if sc := t.writer(c.Raw); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	key := pendingKey{c.Stream, c.EventID}
	if c.Attempt > 1 && c.EventID != "" {
		t.mu.Lock()
		prev, ok := t.failed[key]
		t.mu.Unlock()
		if ok {
			links = append(links, trace.Link{SpanContext: prev.span, Attributes: []attribute.KeyValue{attribute.String("watchtree.link", "previous-attempt")}})
		}
	}
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "process "+c.Stream, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrs...), trace.WithLinks(links...), trace.WithTimestamp(start))
	metricAttrs := []attribute.KeyValue{messagingMongoDB, semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(c.Namespace), attrStream.String(c.Stream)}
	return ctx, func(err error) {
		end := time.Now()
		if err != nil {
			et := errorType(err)
			span.RecordError(err, trace.WithTimestamp(end))
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(et)
			metricAttrs = append(metricAttrs, et)
		}
		span.End(trace.WithTimestamp(end))
		t.inst.process.Record(context.Background(), end.Sub(start).Seconds(), metric.WithAttributes(metricAttrs...))
		if c.EventID == "" {
			return
		}
		switch {
		case err != nil:
			t.remember(key, attemptEnd{span: span.SpanContext(), end: end})
		case c.Attempt > 1: // a first attempt that succeeds had nothing remembered: no lock
			t.forget(key)
		}
	}
}

// errorType is error.type: ErrHandlerAborted's own name, else the conventions' (the Go type).
func errorType(err error) attribute.KeyValue {
	if errors.Is(err, observe.ErrHandlerAborted) {
		return semconv.ErrorTypeKey.String("aborted")
	}
	return semconv.ErrorType(err)
}

// writer is the span context of the document's traceparent; invalid when there is none (or
// no field is configured, or it does not parse).
func (t *Telemetry) writer(raw bson.Raw) trace.SpanContext {
	if len(t.field) == 0 || len(raw) == 0 {
		return trace.SpanContext{}
	}
	var tp string
	for _, path := range [][]string{append([]string{"fullDocument"}, t.field...),
		{"updateDescription", "updatedFields", strings.Join(t.field, ".")}} {
		if v, err := raw.LookupErr(path...); err == nil {
			if s, ok := v.StringValueOK(); ok {
				tp = s
				break
			}
		}
	}
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

func splitField(f string) []string {
	if f == "" {
		return nil
	}
	return strings.Split(f, ".")
}

// remember records an event's failed attempt, forgetting the oldest beyond MaxPending.
func (t *Telemetry) remember(k pendingKey, a attemptEnd) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	a.seq = t.seq
	t.failed[k] = a
	t.order = append(t.order, pendingRef{k, a.seq})
	// order may hold stale references (an event forgotten, or remembered again since): they
	// are skipped here and dropped by the compaction, so the list stays within 2×MaxPending+1.
	for len(t.failed) > t.opts.MaxPending {
		r := t.order[0]
		t.order = t.order[1:]
		if cur, ok := t.failed[r.key]; ok && cur.seq == r.seq {
			delete(t.failed, r.key)
		}
	}
	if len(t.order) > 2*t.opts.MaxPending {
		kept := t.order[:0]
		for _, r := range t.order {
			if cur, ok := t.failed[r.key]; ok && cur.seq == r.seq {
				kept = append(kept, r)
			}
		}
		clear(t.order[len(kept):])
		t.order = kept
	}
}

func (t *Telemetry) forget(k pendingKey) {
	t.mu.Lock()
	delete(t.failed, k)
	t.mu.Unlock()
}

// lastAttempt returns an event's last failed attempt; take removes it.
func (t *Telemetry) lastAttempt(k pendingKey, take bool) (attemptEnd, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.failed[k]
	if take {
		delete(t.failed, k)
	}
	return a, ok
}

// snapshotSpan is an open snapshot span and when its latest milestone was.
type snapshotSpan struct {
	span trace.Span
	last time.Time
}

// span starts, annotates or ends the spans ev concerns.
func (t *Telemetry) span(ev observe.Event) {
	m := ev.EventMeta()
	stream := attrStream.String(m.Stream)
	switch e := ev.(type) {
	case observe.DeadLettered:
		t.deadLetterSpan(m, e.EventID, true, e.Err, nil, attrAttempts.Int(e.Attempts), attrDropped.Bool(e.Dropped),
			attrOperationType.String(e.OperationType))
	case observe.DeadLetterFailed:
		t.deadLetterSpan(m, e.EventID, false, e.Err, e.Err)
	case observe.Skipped:
		t.forget(pendingKey{m.Stream, e.EventID})
	case observe.Stopped:
		t.endSnapshots(m, "the stream stopped")
		if e.Reason != observe.Crashed {
			if sp, ok := t.takeRestart(m.Stream); ok {
				sp.SetAttributes(attribute.String("watchtree.outcome", "stopped"))
				sp.End(trace.WithTimestamp(m.Time))
			}
			return
		}
		sp, ok := t.takeRestart(m.Stream)
		if !ok {
			_, sp = t.tracer.Start(context.Background(), "restart "+m.Stream, trace.WithTimestamp(m.Time),
				trace.WithAttributes(stream))
			if e.Cause != nil {
				sp.SetAttributes(attrCause.String(e.Cause.Error()))
			}
		} else {
			sp.AddEvent("restart attempt failed", trace.WithTimestamp(m.Time), trace.WithAttributes(causeAttrs(e.Cause)...))
		}
		if e.Terminal {
			sp.SetAttributes(attrTerminal.Bool(true))
			sp.SetStatus(codes.Error, "terminal stop: nothing restarts the stream")
			if e.Cause != nil {
				sp.RecordError(e.Cause, trace.WithTimestamp(m.Time))
			}
			sp.End(trace.WithTimestamp(m.Time))
			return
		}
		sp.SetAttributes(attrAttempt.Int(e.Attempt), attrRestartIn.Float64(e.RestartIn.Seconds()))
		t.mu.Lock()
		t.restarts[m.Stream] = sp
		t.mu.Unlock()
	case observe.Restarted:
		sp, ok := t.takeRestart(m.Stream)
		if !ok { // the crash was not seen (the queue dropped it): the restart alone
			_, sp = t.tracer.Start(context.Background(), "restart "+m.Stream, trace.WithTimestamp(m.Time),
				trace.WithAttributes(stream))
		}
		sp.SetAttributes(attrAttempt.Int(e.Attempt), attribute.String("watchtree.outcome", "restarted"))
		sp.SetStatus(codes.Ok, "")
		sp.End(trace.WithTimestamp(m.Time))
	case observe.LeadershipChanged:
		_, sp := t.tracer.Start(context.Background(), "lease "+m.Stream, trace.WithTimestamp(m.Time),
			trace.WithAttributes(stream, attrChange.String(string(e.Change)), attrLeader.Bool(e.Leader),
				attrEpoch.Int64(e.Epoch), attrOwner.String(e.Owner), attrInstance.String(e.Instance)))
		if e.Why != "" {
			sp.SetAttributes(attrWhy.String(e.Why))
		}
		if e.Change == observe.LeadershipFenced {
			sp.SetStatus(codes.Error, "fenced: a newer epoch refused a write")
		}
		sp.End(trace.WithTimestamp(m.Time))
	case observe.SnapshotStarted:
		t.startSnapshot(m, e.Snapshot)
	case observe.SnapshotResumed:
		t.startSnapshot(m, e.Snapshot)
	case observe.SnapshotProgress:
		t.snapshotProgress(m, e.Snapshot)
	case observe.SnapshotDone:
		t.endSnapshot(m, e.Snapshot)
	}
}

func causeAttrs(err error) []attribute.KeyValue {
	if err == nil {
		return nil
	}
	return []attribute.KeyValue{attrCause.String(err.Error())}
}

func (t *Telemetry) takeRestart(stream string) (trace.Span, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sp, ok := t.restarts[stream]
	delete(t.restarts, stream)
	return sp, ok
}

// deadLetterSpan is the span of a dead-letter write: a child of the event's last failed
// attempt when it is remembered, from that attempt's end to the write. settled says the event
// is done with (written or dropped); failed is a failed write's error.
func (t *Telemetry) deadLetterSpan(m observe.Meta, id string, settled bool, final, failed error, attrs ...attribute.KeyValue) {
	ctx := context.Background()
	start := m.Time
	if a, ok := t.lastAttempt(pendingKey{m.Stream, id}, settled); ok {
		ctx = trace.ContextWithSpanContext(ctx, a.span)
		if a.end.Before(start) {
			start = a.end
		}
	}
	attrs = append(attrs, attrStream.String(m.Stream), semconv.MessagingMessageID(id), attrWritten.Bool(failed == nil),
		messagingMongoDB)
	_, sp := t.tracer.Start(ctx, "dead-letter "+m.Stream, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if failed != nil {
		sp.RecordError(failed, trace.WithTimestamp(m.Time))
		sp.SetStatus(codes.Error, "dead-letter write failed: "+failed.Error())
	} else if final != nil {
		sp.SetAttributes(attrCause.String(final.Error()))
	}
	sp.End(trace.WithTimestamp(m.Time))
}

func snapshotAttrs(s observe.SnapshotStatus) []attribute.KeyValue {
	return []attribute.KeyValue{attrDocuments.Int64(int64(s.Documents)), attrRangesDone.Int(s.RangesDone),
		attrRangesTotal.Int(s.RangesTotal), attrChunks.Int(s.ChunksDone), attrAtRisk.Bool(s.AtRisk)}
}

func (t *Telemetry) startSnapshot(m observe.Meta, s observe.SnapshotStatus) {
	_, sp := t.tracer.Start(context.Background(), "snapshot "+m.Stream, trace.WithTimestamp(m.Time),
		trace.WithAttributes(attrStream.String(m.Stream), attrSnapshotID.String(s.ID), attrReason.String(s.Reason),
			attrResumed.Bool(s.Resumed), attrRangesTotal.Int(s.RangesTotal)))
	t.mu.Lock()
	defer t.mu.Unlock()
	byID := t.snapshots[m.Stream]
	if byID == nil {
		byID = map[string]*snapshotSpan{}
		t.snapshots[m.Stream] = byID
	}
	if old := byID[s.ID]; old != nil { // a start not preceded by the end of the run before
		old.span.End(trace.WithTimestamp(m.Time))
	}
	byID[s.ID] = &snapshotSpan{span: sp, last: m.Time}
}

func (t *Telemetry) openSnapshot(m observe.Meta, s observe.SnapshotStatus, take bool) *snapshotSpan {
	t.mu.Lock()
	defer t.mu.Unlock()
	ss := t.snapshots[m.Stream][s.ID]
	if take && ss != nil {
		delete(t.snapshots[m.Stream], s.ID)
	}
	return ss
}

func (t *Telemetry) snapshotProgress(m observe.Meta, s observe.SnapshotStatus) {
	ss := t.openSnapshot(m, s, false)
	if ss == nil {
		return // its start was not seen
	}
	if s.Reason == "on-demand" { // one progress per chunk
		ctx := trace.ContextWithSpan(context.Background(), ss.span)
		_, ch := t.tracer.Start(ctx, "snapshot chunk "+m.Stream, trace.WithTimestamp(ss.last),
			trace.WithAttributes(append(snapshotAttrs(s), attrStream.String(m.Stream), attrSnapshotID.String(s.ID))...))
		ch.End(trace.WithTimestamp(m.Time))
	} else {
		ss.span.AddEvent("progress", trace.WithTimestamp(m.Time), trace.WithAttributes(snapshotAttrs(s)...))
	}
	t.mu.Lock()
	ss.last = m.Time
	t.mu.Unlock()
}

func (t *Telemetry) endSnapshot(m observe.Meta, s observe.SnapshotStatus) {
	ss := t.openSnapshot(m, s, true)
	if ss == nil {
		return
	}
	ss.span.SetAttributes(append(snapshotAttrs(s), attrSnapDead.Int64(int64(s.DeadLettered)), attrPhase.String(s.Phase))...)
	switch s.Phase {
	case "failed", "abandoned":
		ss.span.SetStatus(codes.Error, s.Phase+": "+s.Error)
	default:
		ss.span.SetStatus(codes.Ok, "")
	}
	ss.span.End(trace.WithTimestamp(m.Time))
}

// endSnapshots ends the stream's open snapshot spans with status Error: the run is over (a
// later run resumes the snapshot in a new span).
func (t *Telemetry) endSnapshots(m observe.Meta, why string) {
	t.mu.Lock()
	byID := t.snapshots[m.Stream]
	delete(t.snapshots, m.Stream)
	t.mu.Unlock()
	for _, ss := range byID {
		ss.span.SetStatus(codes.Error, why)
		ss.span.End(trace.WithTimestamp(m.Time))
	}
}
