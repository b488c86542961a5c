package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	wtprom "github.com/watchtree/watchtree/metrics/prometheus"
	"github.com/watchtree/watchtree/observe"
)

// fakeSource is a runtime of fixed streams, whose figures a test edits between scrapes.
type fakeSource struct {
	mu  sync.Mutex
	sts []watchtree.StreamStatus
	rd  watchtree.ServerReadings
}

func (f *fakeSource) Streams(context.Context) ([]watchtree.StreamStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]watchtree.StreamStatus(nil), f.sts...), nil
}

func (f *fakeSource) Readings(context.Context) watchtree.ServerReadings {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rd
}

func (f *fakeSource) ObserverStats() watchtree.ObserverStats { return watchtree.ObserverStats{} }

func (f *fakeSource) edit(fn func(st *watchtree.StreamStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.sts[0])
}

// attached returns a Metrics attached to src, in a registry of its own.
func attached(t *testing.T, src wtprom.Source) (*wtprom.Metrics, *prom.Registry) {
	t.Helper()
	m := wtprom.New(wtprom.Options{})
	if err := m.Attach(src); err != nil {
		t.Fatal(err)
	}
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(m)
	return m, reg
}

// TestEveryCounterHasASeriesFromTheStart: before any event, every counter of a stream has its
// series at 0, so that rate() and increase() alerts see the stream. Before, a counter had no
// series until its first event.
func TestEveryCounterHasASeriesFromTheStart(t *testing.T) {
	src := &fakeSource{sts: []watchtree.StreamStatus{{Name: "pay", State: watchtree.StateRunning}}}
	_, reg := attached(t, src)
	fams := scrape(t, reg)
	pay := map[string]string{"stream": "pay"}
	for _, name := range []string{"watchtree_retries_total", "watchtree_dead_letters_total", "watchtree_events_dropped_total",
		"watchtree_dead_letter_failures_total", "watchtree_checkpoints_total", "watchtree_checkpoint_failures_total",
		"watchtree_checkpoint_refused_total",
		"watchtree_history_lost_total", "watchtree_gaps_total", "watchtree_restarts_total", "watchtree_handler_duration_seconds"} {
		if v, ok := value(fams, name, pay); !ok || v != 0 {
			t.Errorf("%s{stream=pay} = %v (present %v), want a series at 0", name, v, ok)
		}
	}
	for _, l := range []map[string]string{{"reason": "crashed", "terminal": "false"}, {"reason": "crashed", "terminal": "true"},
		{"reason": "graceful", "terminal": "false"}} {
		l["stream"] = "pay"
		if v, ok := value(fams, "watchtree_stops_total", l); !ok || v != 0 {
			t.Errorf("watchtree_stops_total%v = %v (present %v), want 0", l, v, ok)
		}
	}
}

// TestStandbyHasNoLag: a standby reads nothing, so it exports no stream_lag_seconds (its read
// position is its last term's and would grow without end); a leader does.
func TestStandbyHasNoLag(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	src := &fakeSource{sts: []watchtree.StreamStatus{
		{Name: "standby", Mode: watchtree.SingleLeader.String(), State: watchtree.StateStandby, ReadThrough: long,
			Lease: &watchtree.LeaseStatus{Role: watchtree.RoleStandby, Epoch: 3}},
		{Name: "leader", Mode: watchtree.SingleLeader.String(), State: watchtree.StateRunning, ReadThrough: time.Now(),
			Lease: &watchtree.LeaseStatus{Role: watchtree.RoleLeader, Epoch: 4}},
	}}
	_, reg := attached(t, src)
	fams := scrape(t, reg)
	if v, ok := value(fams, "watchtree_stream_lag_seconds", map[string]string{"stream": "standby"}); ok {
		t.Errorf("a standby exports stream_lag_seconds %v", v)
	}
	if v, ok := value(fams, "watchtree_stream_lag_seconds", map[string]string{"stream": "leader"}); !ok || v > 60 {
		t.Errorf("the leader's lag %v (present %v)", v, ok)
	}
}

// TestRestartsCountEveryCrashLoop: restarts_total is the supervisor's count of restarts, also
// those of a crash loop whose stream never came up again (no Restarted event). Before, it
// counted Restarted events: 1 after 37 crash loops.
func TestRestartsCountEveryCrashLoop(t *testing.T) {
	src := &fakeSource{sts: []watchtree.StreamStatus{{Name: "loop", State: watchtree.StateBackoff, Restarts: 37, Deaths: 38, Attempt: 37}}}
	m, reg := attached(t, src)
	m.OnEvent(observe.Restarted{Meta: observe.Meta{Stream: "loop"}, Attempt: 1}) // the one time it came up
	if v, _ := value(scrape(t, reg), "watchtree_restarts_total", map[string]string{"stream": "loop"}); v != 37 {
		t.Errorf("restarts_total = %v after 37 restarts, want 37", v)
	}
}

// TestOneCounterPerFact: a skip is counted once, as events_total{outcome="skipped"}; there is
// no skipped_total beside it.
func TestOneCounterPerFact(t *testing.T) {
	src := &fakeSource{sts: []watchtree.StreamStatus{{Name: "pay", State: watchtree.StateRunning, Settled: 2, Skipped: 2}}}
	m, reg := attached(t, src)
	m.OnEvent(observe.Skipped{Meta: observe.Meta{Stream: "pay"}, EventID: "e1", Reason: observe.SkipByHandler})
	fams := scrape(t, reg)
	if _, ok := fams["watchtree_skipped_total"]; ok {
		t.Error("watchtree_skipped_total duplicates events_total{outcome=\"skipped\"}")
	}
	if v, _ := value(fams, "watchtree_events_total", map[string]string{"stream": "pay", "outcome": "skipped"}); v != 2 {
		t.Errorf("events_total{skipped} = %v, want 2", v)
	}
}

// TestLeaseMetricsAndBuildInfo: a SingleLeader stream exports its lease epoch and counts;
// build_info carries the versions.
func TestLeaseMetricsAndBuildInfo(t *testing.T) {
	src := &fakeSource{sts: []watchtree.StreamStatus{{Name: "bill", Mode: watchtree.SingleLeader.String(), State: watchtree.StateRunning,
		Lease: &watchtree.LeaseStatus{Role: watchtree.RoleLeader, Epoch: 7, Acquisitions: 2, Losses: 1, HandOvers: 1, Fenced: 3}}}}
	_, reg := attached(t, src)
	fams := scrape(t, reg)
	bill := map[string]string{"stream": "bill"}
	for name, want := range map[string]float64{"watchtree_lease_epoch": 7, "watchtree_lease_acquisitions_total": 2,
		"watchtree_lease_losses_total": 1, "watchtree_lease_handovers_total": 1, "watchtree_lease_fenced_writes_total": 3} {
		if v, ok := value(fams, name, bill); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	bi := fams["watchtree_build_info"]
	if bi == nil || len(bi.GetMetric()) != 1 || bi.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("build_info: %v", bi)
	}
	labels := map[string]string{}
	for _, l := range bi.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != watchtree.Version() || labels["version"] == "" || !strings.HasPrefix(labels["go_version"], "go") {
		t.Errorf("build_info labels %v, want version %q (watchtree.Version)", labels, watchtree.Version())
	}
}

// TestAttachMisuse: a scrape of a Metrics never attached fails with ErrNotAttached (before, it
// silently left every state gauge out); a second Attach and Attach(nil) are errors.
func TestAttachMisuse(t *testing.T) {
	m := wtprom.New(wtprom.Options{})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	if _, err := reg.Gather(); !errors.Is(err, wtprom.ErrNotAttached) {
		t.Errorf("scrape before Attach: %v, want ErrNotAttached", err)
	}
	if err := m.Attach(nil); err == nil {
		t.Error("Attach(nil) succeeded")
	}
	src := &fakeSource{}
	if err := m.Attach(src); err != nil {
		t.Fatal(err)
	}
	if err := m.Attach(src); !errors.Is(err, wtprom.ErrAttached) {
		t.Errorf("second Attach: %v, want ErrAttached", err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("scrape after Attach: %v", err)
	}
}

// token is a resume token of the server's shape at cluster time (t, i).
func token(t, i uint32) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X2B0229296E04", t, i)}})
	if err != nil {
		panic(err)
	}
	return b
}

// TestCheckpointAgeOfAnIdleStream: an idle stream, whose checkpoint covers everything it
// settled, has checkpoint_age_seconds 0 although its latest write is minutes old and its
// settled position moved on with post-batch resume tokens (written only every IdleInterval);
// settled events waiting for a write, or a failed write, give their age. Before, an idle healthy
// stream aged to 5 min.
func TestCheckpointAgeOfAnIdleStream(t *testing.T) {
	written := time.Now().Add(-4 * time.Minute)
	src := &fakeSource{sts: []watchtree.StreamStatus{{Name: "quiet", State: watchtree.StateRunning, CheckpointAt: written,
		CheckpointSource: "initial", Checkpoint: token(100, 1), SettledThrough: bson.Timestamp{T: 100, I: 1}, ReadThrough: time.Now()}}}
	m, reg := attached(t, src)
	age := func() float64 {
		t.Helper()
		v, ok := value(scrape(t, reg), "watchtree_checkpoint_age_seconds", map[string]string{"stream": "quiet"})
		if !ok {
			t.Fatal("no checkpoint_age_seconds")
		}
		return v
	}
	if v := age(); v != 0 {
		t.Errorf("idle since its checkpoint: age %v, want 0", v)
	}
	src.edit(func(st *watchtree.StreamStatus) { st.SettledThrough = bson.Timestamp{T: 400, I: 1} }) // idle tokens
	if v := age(); v != 0 {
		t.Errorf("idle, its settled position moved by post-batch tokens: age %v, want 0", v)
	}
	src.edit(func(st *watchtree.StreamStatus) {
		st.Settled, st.Handled, st.SettledThrough = 3, 3, bson.Timestamp{T: 410, I: 3}
	})
	time.Sleep(20 * time.Millisecond) // the age to measure, not a wait for an outcome
	if v := age(); v <= 0 || v > 60 {
		t.Errorf("3 events settled since the last reading: age %v, want the little time since that reading", v)
	}
	m.OnEvent(observe.Checkpointed{Meta: observe.Meta{Stream: "quiet"}, Token: token(410, 3), Settled: 3})
	src.edit(func(st *watchtree.StreamStatus) {
		st.CheckpointAt, st.CheckpointSource, st.Checkpoint = time.Now(), "event", token(410, 3)
	})
	if v := age(); v != 0 {
		t.Errorf("written after the settlements: age %v, want 0", v)
	}
	m.OnEvent(observe.CheckpointFailed{Meta: observe.Meta{Stream: "quiet"}, Err: errors.New("store down"), Unflushed: 0})
	src.edit(func(st *watchtree.StreamStatus) {
		st.Settled, st.Handled, st.SettledThrough = 4, 4, bson.Timestamp{T: 420, I: 1}
	})
	time.Sleep(20 * time.Millisecond)
	if v := age(); v <= 0 {
		t.Errorf("after a failed write: age %v, want the time the unwritten settlement waited", v)
	}
}

// TestCheckpointAgeAfterABurst: 20 events settle, a write covers them, and the age reads 0 at
// every later scrape, also once the settled position moves on with idle post-batch tokens.
// Before, the adapter dated the settlements from the scrape that first saw them, after the
// write, and the age grew from then on (1.0, 3.1 … 31 s on an idle stream).
func TestCheckpointAgeAfterABurst(t *testing.T) {
	src := &fakeSource{sts: []watchtree.StreamStatus{{Name: "burst", State: watchtree.StateRunning, CheckpointAt: time.Now(),
		CheckpointSource: "initial", Checkpoint: token(100, 1), SettledThrough: bson.Timestamp{T: 100, I: 1}, ReadThrough: time.Now()}}}
	m, reg := attached(t, src)
	age := func() float64 {
		t.Helper()
		v, ok := value(scrape(t, reg), "watchtree_checkpoint_age_seconds", map[string]string{"stream": "burst"})
		if !ok {
			t.Fatal("no checkpoint_age_seconds")
		}
		return v
	}
	if v := age(); v != 0 {
		t.Fatalf("before the burst: %v", v)
	}
	// The burst settles and is written between two scrapes.
	m.OnEvent(observe.Checkpointed{Meta: observe.Meta{Stream: "burst"}, Token: token(101, 20), Settled: 20})
	src.edit(func(st *watchtree.StreamStatus) {
		st.Settled, st.Handled, st.SettledThrough = 20, 20, bson.Timestamp{T: 101, I: 20}
		st.Checkpoint, st.CheckpointAt, st.CheckpointSource = token(101, 20), time.Now(), "event"
	})
	time.Sleep(20 * time.Millisecond)
	src.edit(func(st *watchtree.StreamStatus) { st.SettledThrough = bson.Timestamp{T: 111, I: 1} }) // a no-op's token
	for i := range 3 {
		if v := age(); v != 0 {
			t.Errorf("scrape %d after the burst's write: age %v, want 0", i, v)
		}
	}
}
