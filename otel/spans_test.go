package otel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.opentelemetry.io/otel/codes"

	"github.com/watchtree/watchtree/observe"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func rawEvent(t *testing.T, fields bson.D) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(append(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82AB"}}}}, fields...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestWriterTraceparent: the traceparent is read from fullDocument (a dotted field nested), else
// from an update's updatedFields; nothing without a field configured or with a value that does
// not parse.
func TestWriterTraceparent(t *testing.T) {
	cases := []struct {
		field string
		ev    bson.D
		want  bool
	}{
		{"traceparent", bson.D{{Key: "fullDocument", Value: bson.D{{Key: "traceparent", Value: tp}}}}, true},
		{"meta.tp", bson.D{{Key: "fullDocument", Value: bson.D{{Key: "meta", Value: bson.D{{Key: "tp", Value: tp}}}}}}, true},
		{"meta.tp", bson.D{{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "meta.tp", Value: tp}}}}}}, true},
		{"traceparent", bson.D{{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "traceparent", Value: tp}}}}}}, true},
		{"", bson.D{{Key: "fullDocument", Value: bson.D{{Key: "traceparent", Value: tp}}}}, false},
		{"traceparent", bson.D{{Key: "fullDocument", Value: bson.D{{Key: "traceparent", Value: "not-a-traceparent"}}}}, false},
		{"traceparent", bson.D{{Key: "fullDocument", Value: bson.D{{Key: "traceparent", Value: 42}}}}, false},
		{"traceparent", bson.D{{Key: "documentKey", Value: bson.D{{Key: "_id", Value: 1}}}}, false},
	}
	for i, c := range cases {
		h := newHarness(t, Options{TraceparentField: c.field})
		sc := h.tel.writer(rawEvent(t, c.ev))
		if sc.IsValid() != c.want {
			t.Errorf("case %d (%q, %v): valid %v, want %v", i, c.field, c.ev, sc.IsValid(), c.want)
		}
		if c.want && sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("case %d: trace %v", i, sc.TraceID())
		}
	}
}

// TestSnapshotSpans: a snapshot run is one span; an on-demand snapshot's progress reports (one
// per chunk) are child spans, the initial snapshot's are span events; a stop ends the run's span
// with status Error.
func TestSnapshotSpans(t *testing.T) {
	h := newHarness(t, Options{})
	at := func(s int) observe.Meta { return observe.Meta{Stream: "s", Time: time.Unix(1700000000+int64(s), 0)} }
	od := observe.SnapshotStatus{ID: "od-1", Reason: "on-demand"}
	h.tel.OnEvent(observe.SnapshotStarted{Meta: at(0), Snapshot: od})
	od.ChunksDone = 1
	h.tel.OnEvent(observe.SnapshotProgress{Meta: at(1), Snapshot: od})
	od.ChunksDone = 2
	h.tel.OnEvent(observe.SnapshotProgress{Meta: at(3), Snapshot: od})
	od.Phase, od.Documents = "done", 20
	h.tel.OnEvent(observe.SnapshotDone{Meta: at(4), Snapshot: od})

	chunks := h.ended("snapshot chunk s")
	runs := h.ended("snapshot s")
	if len(chunks) != 2 || len(runs) != 1 {
		t.Fatalf("%d chunk spans, %d snapshot spans", len(chunks), len(runs))
	}
	run := runs[0]
	for i, c := range chunks {
		if c.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("chunk %d is not a child of the snapshot span", i)
		}
	}
	if d := chunks[1].EndTime().Sub(chunks[1].StartTime()); d != 2*time.Second {
		t.Errorf("chunk 2 lasted %v, want 2s (from the first chunk's end)", d)
	}
	if a := attrsOf(run.Attributes()); a["watchtree.snapshot.id"] != "od-1" || a["watchtree.snapshot.phase"] != "done" ||
		a["watchtree.snapshot.documents"] != "20" || run.Status().Code != codes.Ok {
		t.Errorf("snapshot span %v, status %v", a, run.Status())
	}

	initial := observe.SnapshotStatus{ID: "snap-1", Reason: "initial"}
	h.tel.OnEvent(observe.SnapshotStarted{Meta: at(10), Snapshot: initial})
	h.tel.OnEvent(observe.SnapshotProgress{Meta: at(11), Snapshot: initial})
	h.tel.OnEvent(observe.Stopped{Meta: at(12), Reason: observe.Crashed, Cause: errors.New("cursor died"), Attempt: 1, RestartIn: time.Second})
	runs = h.ended("snapshot s")
	if len(runs) != 2 || len(h.ended("snapshot chunk s")) != 2 {
		t.Fatalf("%d snapshot spans, %d chunk spans after the initial snapshot's crash", len(runs), len(h.ended("snapshot chunk s")))
	}
	if r := runs[1]; r.Status().Code != codes.Error || len(r.Events()) != 1 || r.Events()[0].Name != "progress" {
		t.Errorf("the crashed run: status %v, events %v", r.Status(), r.Events())
	}
}

// TestRestartSpans: a crash opens the restart span, a failed attempt is an event of it, a
// terminal crash ends it with status Error; a graceful stop ends an open one.
func TestRestartSpans(t *testing.T) {
	h := newHarness(t, Options{})
	m := func(s int) observe.Meta { return observe.Meta{Stream: "s", Time: time.Unix(1700000000+int64(s), 0)} }
	boom := errors.New("boom")
	h.tel.OnEvent(observe.Stopped{Meta: m(0), Reason: observe.Crashed, Cause: boom, Attempt: 1, RestartIn: time.Second})
	h.tel.OnEvent(observe.Stopped{Meta: m(1), Reason: observe.Crashed, Cause: boom, Attempt: 2, RestartIn: 2 * time.Second})
	h.tel.OnEvent(observe.Stopped{Meta: m(3), Reason: observe.Crashed, Cause: boom, Terminal: true})
	rs := h.ended("restart s")
	if len(rs) != 1 {
		t.Fatalf("%d restart spans", len(rs))
	}
	r := rs[0]
	if r.Status().Code != codes.Error || attrsOf(r.Attributes())["watchtree.terminal"] != "true" ||
		r.EndTime().Sub(r.StartTime()) != 3*time.Second {
		t.Errorf("terminal restart span: status %v, attributes %v, %v", r.Status(), attrsOf(r.Attributes()), r.EndTime().Sub(r.StartTime()))
	}
	var names []string
	for _, e := range r.Events() {
		names = append(names, e.Name)
	}
	if fmt.Sprint(names) != "[restart attempt failed restart attempt failed exception]" {
		t.Errorf("events %v", names)
	}
	h.tel.OnEvent(observe.Stopped{Meta: m(4), Reason: observe.Crashed, Cause: boom, Attempt: 1, RestartIn: time.Second})
	h.tel.OnEvent(observe.Stopped{Meta: m(5), Reason: observe.Graceful})
	if rs = h.ended("restart s"); len(rs) != 2 || attrsOf(rs[1].Attributes())["watchtree.outcome"] != "stopped" {
		t.Errorf("a graceful stop did not end the open restart span: %d spans", len(rs))
	}
}

// TestPendingAttemptsAreBounded: beyond MaxPending events with a failed attempt, the oldest is
// forgotten; a successful attempt or a skip forgets its event.
func TestPendingAttemptsAreBounded(t *testing.T) {
	h := newHarness(t, Options{MaxPending: 2})
	fail := func(id string) {
		_, done := h.tel.TraceHandler(context.Background(), observe.HandlerCall{Stream: "s", EventID: id, Attempt: 1})
		done(errors.New("boom"))
	}
	fail("a")
	fail("b")
	fail("c")
	has := func(id string) bool { _, ok := h.tel.lastAttempt(pendingKey{"s", id}, false); return ok }
	if has("a") || !has("b") || !has("c") {
		t.Errorf("after 3 failures with MaxPending 2: a %v b %v c %v, want false true true", has("a"), has("b"), has("c"))
	}
	_, done := h.tel.TraceHandler(context.Background(), observe.HandlerCall{Stream: "s", EventID: "b", Attempt: 2})
	done(nil)
	h.tel.OnEvent(observe.Skipped{Meta: observe.Meta{Stream: "s"}, EventID: "c"})
	if has("b") || has("c") {
		t.Errorf("a success and a skip left their events remembered: b %v c %v", has("b"), has("c"))
	}
	for i := range 100 {
		fail(fmt.Sprint(i))
	}
	if n := len(h.tel.order); n > 2*2+1 {
		t.Errorf("the order list holds %d keys for MaxPending 2", n)
	}
}

// TestPendingAttemptsOfOneEvent: an event that fails, succeeds and fails again many times keeps
// one entry, and its stale references neither grow the order list nor evict it while it is
// among the newest.
func TestPendingAttemptsOfOneEvent(t *testing.T) {
	h := newHarness(t, Options{MaxPending: 2})
	call := func(id string, attempt int, err error) {
		_, done := h.tel.TraceHandler(context.Background(), observe.HandlerCall{Stream: "s", EventID: id, Attempt: attempt})
		done(err)
	}
	boom := errors.New("boom")
	for range 1000 {
		call("a", 1, boom)
		call("a", 2, nil)
	}
	call("a", 1, boom)
	call("b", 1, boom)
	has := func(id string) bool { _, ok := h.tel.lastAttempt(pendingKey{"s", id}, false); return ok }
	if !has("a") || !has("b") {
		t.Errorf("a %v b %v, want both remembered (MaxPending 2)", has("a"), has("b"))
	}
	if n := len(h.tel.order); n > 2*2+1 {
		t.Errorf("the order list holds %d references for MaxPending 2", n)
	}
	call("c", 1, boom)
	if has("a") || !has("b") || !has("c") {
		t.Errorf("after c: a %v b %v c %v, want the oldest (a) forgotten", has("a"), has("b"), has("c"))
	}
}
