package observe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/observe"
)

// sample is one event and its one-line description.
type sample struct {
	ev   observe.Event
	want string
}

// samples holds at least one event of every kind. A kind added without a sample here fails
// TestEveryKindHasASample.
func samples() []sample {
	m := observe.Meta{Stream: "s", Time: time.Unix(1700000000, 0)}
	cause := errors.New("cause")
	snap := observe.SnapshotStatus{ID: "snap-1", Reason: "initial", RangesDone: 1, RangesTotal: 4, Documents: 10,
		EstimatedTotal: 40, DeadLettered: 2, Rate: 5, ETA: 6 * time.Second}
	return []sample{
		{observe.Started{Meta: m, Position: "checkpoint"}, "stream s started from checkpoint"},
		{observe.Stopped{Meta: m, Reason: observe.Crashed, Cause: fmt.Errorf("x: %w", cause), Terminal: true},
			"stream s stopped (crashed), terminal: x: cause"},
		{observe.Stopped{Meta: m, Reason: observe.Graceful}, "stream s stopped (graceful)"},
		{observe.Stopped{Meta: m, Reason: observe.Crashed, Cause: cause, Attempt: 2, RestartIn: 2 * time.Second},
			"stream s stopped (crashed), restart attempt 2 in 2s: cause"},
		{observe.Restarted{Meta: m, Attempt: 2, Cause: cause}, "stream s restarted (attempt 2) after: cause"},
		{observe.RetryScheduled{Meta: m, EventID: "82AA", Attempt: 1, Delay: time.Second, Err: cause},
			"stream s: event 82AA attempt 1 failed, retry in 1s: cause"},
		{observe.Skipped{Meta: m, EventID: "82AB", Reason: observe.SkipByHandler, Detail: "duplicate"},
			"stream s: event 82AB skipped: duplicate"},
		{observe.DeadLettered{Meta: m, EventID: "82AC", OperationType: "insert", Attempts: 3, Err: cause},
			"stream s: insert event 82AC dead-lettered after 3 attempts: cause"},
		{observe.DeadLettered{Meta: m, EventID: "82AD", OperationType: "update", Attempts: 3, Err: cause, Dropped: true},
			"stream s: update event 82AD dropped (dead letters disabled) after 3 attempts: cause"},
		{observe.DeadLetterFailed{Meta: m, EventID: "82AE", Err: cause},
			"stream s: dead-letter write for event 82AE failed, will retry: cause"},
		{observe.Checkpointed{Meta: m, Settled: 100}, "stream s: checkpoint written (100 settled)"},
		{observe.CheckpointFailed{Meta: m, Err: cause, Unflushed: 250},
			"stream s: checkpoint write failed (250 unflushed), will retry: cause"},
		{observe.CheckpointRefused{Meta: m, Err: cause},
			"stream s: checkpoint write refused, the stored position stands: cause"},
		{observe.HistoryLost{Meta: m, Policy: "ResumeFromNow", Err: cause},
			"stream s: change stream history lost, applying ResumeFromNow: cause"},
		{observe.GapRecorded{Meta: m, Policy: "ResumeFromNow"}, "stream s: gap recorded (ResumeFromNow)"},
		{observe.Invalidated{Meta: m, Cause: "drop", Action: "InvalidateStop"}, `stream s invalidated by "drop", InvalidateStop`},
		{observe.LeadershipChanged{Meta: m, Leader: true, Change: observe.LeadershipAcquired, Epoch: 4}, "stream s: leader (epoch 4)"},
		{observe.LeadershipChanged{Meta: m, Change: observe.LeadershipLost, Epoch: 4, Why: "renewal refused"},
			"stream s: leadership lost (epoch 4): renewal refused"},
		{observe.LeadershipChanged{Meta: m, Leader: false, Owner: "host-1", Epoch: 5}, `stream s: not leader (owner "host-1", epoch 5)`},
		{observe.SnapshotStarted{Meta: m, Snapshot: snap}, "stream s snapshot snap-1 started (initial, 4 ranges, ~40 documents)"},
		{observe.SnapshotResumed{Meta: m, Snapshot: snap}, "stream s snapshot snap-1 resumed (1/4 ranges done, 10 documents)"},
		{observe.SnapshotProgress{Meta: m, Snapshot: snap}, "stream s snapshot snap-1: 1/4 ranges, 10 documents, 5/s, ETA 6s"},
		{observe.SnapshotDone{Meta: m, Snapshot: snap}, "stream s snapshot snap-1 done (10 documents, 2 dead-lettered)"},
		{observe.NamespaceMissing{Meta: m, Namespace: "shop.orderz", Since: time.Unix(1700000000, 0)},
			"stream s: namespace shop.orderz does not exist (since 2023-11-14T22:13:20Z): the stream sees no events until it is created"},
		{observe.CursorChanged{Meta: m, Attached: true, Why: "level with the shared cursor"},
			"stream s attached to the shared cursor: level with the shared cursor"},
		{observe.CursorChanged{Meta: m, Why: "its buffer of 8192 events is full"},
			"stream s detached from the shared cursor, catching up on its own: its buffer of 8192 events is full"},
	}
}

func TestEventStrings(t *testing.T) {
	for _, s := range samples() {
		if got := s.ev.String(); got != s.want {
			t.Errorf("%T.String() = %q, want %q", s.ev, got, s.want)
		}
		if m := s.ev.EventMeta(); m.Stream != "s" || !m.Time.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%T.EventMeta() = %+v", s.ev, m)
		}
	}
	for got, want := range map[fmt.Stringer]string{observe.StopReason(9): "StopReason(9)", observe.SkipReason(9): "SkipReason(9)",
		observe.SkipByHandler: "handler", observe.Kind(0): "Kind(0)", observe.Kind(200): "Kind(200)"} {
		if got.String() != want {
			t.Errorf("String() = %q, want %q", got.String(), want)
		}
	}
}

// TestEveryKindHasASample: Kinds lists every kind once, with a distinct name, and each has an
// event type (a sample above whose Kind it is).
func TestEveryKindHasASample(t *testing.T) {
	byKind := map[observe.Kind]observe.Event{}
	for _, s := range samples() {
		byKind[s.ev.Kind()] = s.ev
	}
	names := map[string]observe.Kind{}
	for _, k := range observe.Kinds() {
		name := k.String()
		if name == "" || strings.HasPrefix(name, "Kind(") {
			t.Errorf("kind %d has no name", uint8(k))
		}
		if other, dup := names[name]; dup {
			t.Errorf("kinds %d and %d share the name %q", uint8(other), uint8(k), name)
		}
		names[name] = k
		if _, ok := byKind[k]; !ok {
			t.Errorf("kind %v has no sample", k)
		}
	}
	if len(byKind) != len(observe.Kinds()) {
		t.Errorf("samples of %d kinds, Kinds lists %d", len(byKind), len(observe.Kinds()))
	}
	if got := observe.Kinds(); &got[0] == &observe.Kinds()[0] {
		t.Error("Kinds returns a shared slice")
	}
}

func TestMulti(t *testing.T) {
	var got []string
	rec := func(name string) observe.Observer {
		return observe.Func(func(ev observe.Event) { got = append(got, name+":"+ev.EventMeta().Stream) })
	}
	panicking := observe.Func(func(observe.Event) { panic("first") })
	m := observe.Multi(rec("a"), nil, panicking, rec("b"), observe.Func(func(observe.Event) { panic("second") }), rec("c"))
	func() {
		defer func() {
			if p := recover(); p != "first" {
				t.Errorf("re-raised %v, want the first panic", p)
			}
		}()
		m.OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
	}()
	if strings.Join(got, ",") != "a:s,b:s,c:s" {
		t.Fatalf("calls = %v: a panic must not hide the event from the others", got)
	}
	got = nil
	observe.Multi().OnEvent(observe.Started{Meta: observe.Meta{Stream: "s"}})
	observe.Multi(rec("x")).OnEvent(observe.Started{Meta: observe.Meta{Stream: "t"}})
	if strings.Join(got, ",") != "x:t" {
		t.Fatalf("calls = %v", got)
	}
	observe.Nop{}.OnEvent(observe.Started{})
}

// handlerRec is an Observer that also times handler calls.
type handlerRec struct {
	observe.Nop
	calls *[]string
}

func (h handlerRec) ObserveHandler(stream string, took time.Duration, err error) {
	*h.calls = append(*h.calls, fmt.Sprintf("%s %v %v", stream, took, err))
}

// TestMultiHandlerObserver: Multi is a HandlerObserver exactly when a member is, and passes the
// calls on to those members only.
func TestMultiHandlerObserver(t *testing.T) {
	if _, ok := observe.Multi(observe.Nop{}, observe.Func(func(observe.Event) {})).(observe.HandlerObserver); ok {
		t.Fatal("a Multi without a HandlerObserver member is one: every handler call would be timed for nobody")
	}
	var calls []string
	m := observe.Multi(observe.Nop{}, handlerRec{calls: &calls}, nil, handlerRec{calls: &calls})
	ho, ok := m.(observe.HandlerObserver)
	if !ok {
		t.Fatal("a Multi with a HandlerObserver member is not one")
	}
	ho.ObserveHandler("s", time.Millisecond, nil)
	if strings.Join(calls, ",") != "s 1ms <nil>,s 1ms <nil>" {
		t.Fatalf("calls = %v", calls)
	}
	m.OnEvent(observe.Started{}) // still an Observer
}

type tracerKey struct{}

// tracerRec is an Observer that also traces handler calls: it appends its name to the
// context's path and records "name:start path" and "name:done err".
type tracerRec struct {
	observe.Nop
	name  string
	calls *[]string
	panic bool
}

func (r tracerRec) TraceHandler(ctx context.Context, c observe.HandlerCall) (context.Context, func(error)) {
	if r.panic {
		panic(r.name)
	}
	path, _ := ctx.Value(tracerKey{}).(string)
	*r.calls = append(*r.calls, fmt.Sprintf("%s:start %s %s#%d", r.name, path, c.Stream, c.Attempt))
	return context.WithValue(ctx, tracerKey{}, path+r.name), func(err error) {
		*r.calls = append(*r.calls, fmt.Sprintf("%s:done %v", r.name, err))
	}
}

// TestMultiHandlerTracer: Multi is a HandlerTracer exactly when a member is (also beside a
// HandlerObserver); it chains the members' contexts in order and ends them in reverse; a
// member's panic leaves the others traced and is re-raised by done.
func TestMultiHandlerTracer(t *testing.T) {
	if _, ok := observe.Multi(observe.Nop{}, handlerRec{}).(observe.HandlerTracer); ok {
		t.Fatal("a Multi without a HandlerTracer member is one")
	}
	var calls []string
	m := observe.Multi(tracerRec{name: "a", calls: &calls}, handlerRec{calls: &calls}, tracerRec{name: "b", calls: &calls})
	if _, ok := m.(observe.HandlerObserver); !ok {
		t.Fatal("a Multi with a HandlerObserver and a HandlerTracer is no HandlerObserver")
	}
	ht, ok := m.(observe.HandlerTracer)
	if !ok {
		t.Fatal("a Multi with a HandlerTracer member is not one")
	}
	ctx, done := ht.TraceHandler(context.Background(), observe.HandlerCall{Stream: "s", Attempt: 2})
	if got, _ := ctx.Value(tracerKey{}).(string); got != "ab" {
		t.Errorf("the handler's context has path %q, want \"ab\"", got)
	}
	done(errors.New("boom"))
	if got := strings.Join(calls, ","); got != "a:start  s#2,b:start a s#2,b:done boom,a:done boom" {
		t.Errorf("calls = %s", got)
	}

	calls = nil
	m = observe.Multi(tracerRec{name: "a", calls: &calls, panic: true}, tracerRec{name: "b", calls: &calls})
	ctx, done = m.(observe.HandlerTracer).TraceHandler(context.Background(), observe.HandlerCall{Stream: "s", Attempt: 1})
	if got, _ := ctx.Value(tracerKey{}).(string); got != "b" {
		t.Errorf("after a's panic the context has path %q, want \"b\"", got)
	}
	func() {
		defer func() {
			if p := recover(); p != "a" {
				t.Errorf("done re-raised %v, want a's panic", p)
			}
		}()
		done(nil)
	}()
	if got := strings.Join(calls, ","); got != "b:start  s#1,b:done <nil>" {
		t.Errorf("calls = %s", got)
	}
}
