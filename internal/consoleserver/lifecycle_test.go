package consoleserver

import (
	"errors"
	"testing"
	"time"

	"github.com/watchtree/watchtree/observe"
)

// lifecycleSamples holds one event of each kind, with the fields the console shows. A kind
// added to package observe without a sample here fails TestLifecycleEventOfEveryKind.
func lifecycleSamples(at time.Time) map[observe.Kind]observe.Event {
	m := observe.Meta{Stream: "orders", Time: at}
	err := errors.New("boom")
	snap := observe.SnapshotStatus{ID: "snap-1", Reason: "initial", RangesTotal: 4, Documents: 10}
	evs := []observe.Event{
		observe.Started{Meta: m, Position: "checkpoint"},
		observe.Stopped{Meta: m, Reason: observe.Crashed, Cause: err, Attempt: 2, RestartIn: time.Second},
		observe.Restarted{Meta: m, Attempt: 2, Cause: err},
		observe.RetryScheduled{Meta: m, EventID: "e1", Attempt: 2, Delay: time.Second, Err: err},
		observe.Skipped{Meta: m, EventID: "e1", Reason: observe.SkipByHandler, Detail: "duplicate"},
		observe.DeadLettered{Meta: m, EventID: "e1", OperationType: "insert", Attempts: 2, Err: err},
		observe.DeadLetterFailed{Meta: m, EventID: "e1", Err: err},
		observe.Checkpointed{Meta: m, Settled: 10},
		observe.CheckpointFailed{Meta: m, Err: err, Unflushed: 10},
		observe.CheckpointRefused{Meta: m, Err: err},
		observe.HistoryLost{Meta: m, Err: err},
		observe.GapRecorded{Meta: m},
		observe.Invalidated{Meta: m, Cause: "drop"},
		observe.LeadershipChanged{Meta: m, Change: observe.LeadershipLost, Epoch: 3, Why: "boom"},
		observe.SnapshotStarted{Meta: m, Snapshot: snap},
		observe.SnapshotResumed{Meta: m, Snapshot: snap},
		observe.SnapshotProgress{Meta: m, Snapshot: observe.SnapshotStatus{ID: "snap-1", AtRisk: true, Warning: "boom"}},
		observe.SnapshotDone{Meta: m, Snapshot: observe.SnapshotStatus{ID: "snap-1", Done: true, Error: "boom"}},
		observe.NamespaceMissing{Meta: m, Namespace: "shop.orderz", Since: at},
		observe.CursorChanged{Meta: m, Why: "boom"},
	}
	out := make(map[observe.Kind]observe.Event, len(evs))
	for _, ev := range evs {
		out[ev.Kind()] = ev
	}
	return out
}

// TestLifecycleEventOfEveryKind: every observe kind maps to a lifecycle event with its kind
// name, the event's stream and time, its one-line message, and the cause and attempt it carries.
// The snapshot kinds once reached the console with an empty kind and a year-1 time.
func TestLifecycleEventOfEveryKind(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	samples := lifecycleSamples(at)
	if len(samples) != len(observe.Kinds()) {
		t.Errorf("%d samples for %d kinds", len(samples), len(observe.Kinds()))
	}
	// The kinds whose sample carries no cause (an error, a reason, a warning), and the attempts.
	noCause := map[observe.Kind]bool{observe.KindStarted: true, observe.KindCheckpointed: true, observe.KindGapRecorded: true,
		observe.KindSnapshotStarted: true, observe.KindSnapshotResumed: true}
	attempts := map[observe.Kind]uint32{observe.KindStopped: 2, observe.KindRestarted: 2, observe.KindRetryScheduled: 2,
		observe.KindDeadLettered: 2}
	for _, k := range observe.Kinds() {
		ev, ok := samples[k]
		if !ok {
			t.Errorf("kind %v has no sample: add one and map it in lifecycleEventOf", k)
			continue
		}
		got := lifecycleEventOf(ev)
		if got.GetKind() == "" || got.GetKind() != k.String() {
			t.Errorf("%v: kind %q", k, got.GetKind())
		}
		if got.GetAt() == nil || got.GetAt().AsTime().IsZero() || !got.GetAt().AsTime().Equal(at) {
			t.Errorf("%v: at %v, want %v", k, got.GetAt().AsTime(), at)
		}
		if got.GetStream() != "orders" || got.GetMessage() != ev.String() || got.GetMessage() == "" {
			t.Errorf("%v: stream %q message %q", k, got.GetStream(), got.GetMessage())
		}
		if (got.GetCause() == "") != noCause[k] {
			t.Errorf("%v: cause %q", k, got.GetCause())
		}
		if got.GetAttempt() != attempts[k] {
			t.Errorf("%v: attempt %d, want %d", k, got.GetAttempt(), attempts[k])
		}
	}
}

// TestLifecycleEventOfSnapshots is the regression of the snapshot kinds: they have their
// names and the event's time.
func TestLifecycleEventOfSnapshots(t *testing.T) {
	at := time.Unix(1700000000, 0)
	m := observe.Meta{Stream: "orders", Time: at}
	for ev, kind := range map[observe.Event]string{
		observe.SnapshotStarted{Meta: m}:  "snapshot-started",
		observe.SnapshotResumed{Meta: m}:  "snapshot-resumed",
		observe.SnapshotProgress{Meta: m}: "snapshot-progress",
		observe.SnapshotDone{Meta: m}:     "snapshot-done",
	} {
		got := lifecycleEventOf(ev)
		if got.GetKind() != kind || !got.GetAt().AsTime().Equal(at) || got.GetAt().AsTime().Year() == 1 {
			t.Errorf("%T: kind %q at %v, want %q at %v", ev, got.GetKind(), got.GetAt().AsTime(), kind, at)
		}
	}
}
