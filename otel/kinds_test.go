package otel

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/watchtree/watchtree/observe"
)

// samples holds one event of each kind. A kind added to package observe without a sample here
// fails TestEveryKindExportedOrListed: decide what it exports, then add it.
func samples() map[observe.Kind]observe.Event {
	m := observe.Meta{Stream: "s", Time: time.Unix(1700000000, 0)}
	err := errors.New("boom")
	snap := observe.SnapshotStatus{ID: "snap-1", Reason: "initial"}
	evs := []observe.Event{
		observe.Started{Meta: m, Position: "checkpoint"},
		observe.Stopped{Meta: m, Reason: observe.Crashed, Cause: err, Attempt: 1, RestartIn: time.Second},
		observe.Restarted{Meta: m, Attempt: 1, Cause: err},
		observe.RetryScheduled{Meta: m, EventID: "e1", Attempt: 1, Delay: time.Second, Err: err},
		observe.Skipped{Meta: m, EventID: "e1", Reason: observe.SkipByHandler, Detail: "dup"},
		observe.DeadLettered{Meta: m, EventID: "e1", OperationType: "insert", Attempts: 3, Err: err},
		observe.DeadLetterFailed{Meta: m, EventID: "e1", Err: err},
		observe.Checkpointed{Meta: m, Settled: 10},
		observe.CheckpointFailed{Meta: m, Err: err, Unflushed: 10},
		observe.CheckpointRefused{Meta: m, Err: err},
		observe.HistoryLost{Meta: m, Err: err},
		observe.GapRecorded{Meta: m},
		observe.Invalidated{Meta: m, Cause: "drop"},
		observe.LeadershipChanged{Meta: m, Leader: true, Change: observe.LeadershipAcquired, Epoch: 1},
		observe.SnapshotStarted{Meta: m, Snapshot: snap},
		observe.SnapshotResumed{Meta: m, Snapshot: snap},
		observe.SnapshotProgress{Meta: m, Snapshot: snap},
		observe.SnapshotDone{Meta: m, Snapshot: snap},
		observe.NamespaceMissing{Meta: m, Namespace: "db.orderz", Since: m.Time},
		observe.CursorChanged{Meta: m, Why: "its buffer of 8192 events is full"},
	}
	out := make(map[observe.Kind]observe.Event, len(evs))
	for _, ev := range evs {
		out[ev.Kind()] = ev
	}
	return out
}

// prelude is what must come before a kind's sample for it to export anything: a snapshot's
// progress and end annotate the span its start opened.
func prelude(k observe.Kind, sm map[observe.Kind]observe.Event) []observe.Event {
	switch k {
	case observe.KindSnapshotProgress, observe.KindSnapshotDone:
		return []observe.Event{sm[observe.KindSnapshotStarted]}
	}
	return nil
}

// TestEveryKindExportedOrListed: every observe kind either starts, changes or ends a span or
// changes a metric of the adapter, or is in notExported with a reason, never both.
func TestEveryKindExportedOrListed(t *testing.T) {
	sm := samples()
	for _, k := range observe.Kinds() {
		ev, ok := sm[k]
		if !ok {
			t.Errorf("kind %v has no sample: add one, and export it or list it in notExported", k)
			continue
		}
		h := newHarness(t, Options{})
		for _, p := range prelude(k, sm) {
			h.tel.OnEvent(p)
		}
		// The counters' zero points come with the stream, whatever the kind of its first event.
		h.tel.zero(ev.EventMeta().Stream)
		before := render(h.collect(t))
		started, ended := len(h.spans.Started()), len(h.spans.Ended())
		events := 0
		for _, s := range h.spans.Started() {
			events += len(s.Events())
		}
		h.tel.OnEvent(ev)
		eventsAfter := 0
		for _, s := range h.spans.Started() {
			eventsAfter += len(s.Events())
		}
		changed := render(h.collect(t)) != before || len(h.spans.Started()) != started ||
			len(h.spans.Ended()) != ended || eventsAfter != events
		why, listed := notExported[k]
		switch {
		case !changed && !listed:
			t.Errorf("kind %v exports nothing and is not in notExported", k)
		case changed && listed:
			t.Errorf("kind %v exports a span or metric but is listed in notExported (%q)", k, why)
		case listed && why == "":
			t.Errorf("kind %v is in notExported without a reason", k)
		}
	}
	if len(sm) != len(observe.Kinds()) {
		t.Errorf("%d samples for %d kinds", len(sm), len(observe.Kinds()))
	}
	for k := range notExported {
		if k.String() == fmt.Sprintf("Kind(%d)", uint8(k)) {
			t.Errorf("notExported lists %v, which is no kind", k)
		}
	}
}
