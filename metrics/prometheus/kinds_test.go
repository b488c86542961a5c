package prometheus

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/watchtree/watchtree/observe"
)

// samples holds one event of each kind. A kind added to package observe without a sample here
// fails TestEveryKindCountedOrListed: decide whether it is a metric, then add it.
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

// counters renders every counter and histogram of m.
func counters(t *testing.T, m *Metrics) string {
	t.Helper()
	reg := prom.NewPedanticRegistry()
	for _, c := range m.vecs() {
		reg.MustRegister(c)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			fmt.Fprintf(&b, "%s %v\n", mf.GetName(), metricValue(mt))
		}
	}
	return b.String()
}

func metricValue(mt *dto.Metric) string {
	var labels []string
	for _, l := range mt.GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(labels)
	return fmt.Sprint(labels, mt.GetCounter().GetValue(), mt.GetHistogram().GetSampleCount())
}

// TestEveryKindCountedOrListed: every observe kind either changes a metric of the adapter or is
// in notCounted with a reason, never both.
func TestEveryKindCountedOrListed(t *testing.T) {
	sm := samples()
	for _, k := range observe.Kinds() {
		ev, ok := sm[k]
		if !ok {
			t.Errorf("kind %v has no sample: add one, and count it or list it in notCounted", k)
			continue
		}
		m := New(Options{})
		m.zero("s") // the stream's zero series, which its first event would create
		before := counters(t, m)
		m.OnEvent(ev)
		changed := counters(t, m) != before
		why, listed := notCounted[k]
		switch {
		case !changed && !listed:
			t.Errorf("kind %v changes no metric and is not in notCounted", k)
		case changed && listed:
			t.Errorf("kind %v changes a metric but is listed in notCounted (%q)", k, why)
		case listed && why == "":
			t.Errorf("kind %v is in notCounted without a reason", k)
		}
	}
	if len(sm) != len(observe.Kinds()) {
		t.Errorf("%d samples for %d kinds", len(sm), len(observe.Kinds()))
	}
	for k := range notCounted {
		if k.String() == fmt.Sprintf("Kind(%d)", uint8(k)) {
			t.Errorf("notCounted lists %v, which is no kind", k)
		}
	}
}
