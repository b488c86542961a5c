package observetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/watchtree/watchtree/observe"
)

// Samples returns one event of each kind of observe.Kinds(), by kind, every one of stream "s"
// at the same fixed time (2023-11-14 22:13:20 UTC), with the fields an exporter reads filled in.
// Each call returns new values.
func Samples() map[observe.Kind]observe.Event {
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

// EveryKind checks that an exporter accounts for every kind of observe.Kinds(): exports(ev)
// feeds the exporter ev, its kind's sample from Samples, and reports whether the exporter's
// output changed (a series, a span). A kind must either change the output or be in unexported
// with a reason, never both; unexported must list only kinds. Each failure is reported on t,
// naming the kind.
func EveryKind(t testing.TB, unexported map[observe.Kind]string, exports func(ev observe.Event) bool) {
	t.Helper()
	sm := Samples()
	for _, k := range observe.Kinds() {
		ev, ok := sm[k]
		if !ok {
			t.Errorf("kind %v has no sample in observetest.Samples: add one", k)
			continue
		}
		changed := exports(ev)
		why, listed := unexported[k]
		switch {
		case !changed && !listed:
			t.Errorf("kind %v exports nothing and is not listed as unexported", k)
		case changed && listed:
			t.Errorf("kind %v exports something but is listed as unexported (%q)", k, why)
		case listed && why == "":
			t.Errorf("kind %v is listed as unexported without a reason", k)
		}
	}
	for k := range unexported {
		if !slices.Contains(observe.Kinds(), k) {
			t.Errorf("%v is listed as unexported but is no kind", k)
		}
	}
}
