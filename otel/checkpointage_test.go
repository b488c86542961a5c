package otel

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// statusSource is a runtime of one stream whose status a test edits between collections.
type statusSource struct {
	mu sync.Mutex
	st watchtree.StreamStatus
}

func (s *statusSource) Streams(context.Context) ([]watchtree.StreamStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []watchtree.StreamStatus{s.st}, nil
}
func (s *statusSource) CountDeadLetters(context.Context, string) (int, error) { return 0, nil }
func (s *statusSource) OplogWindow(context.Context) (time.Time, time.Time, error) {
	return time.Time{}, time.Time{}, fmt.Errorf("no oplog")
}
func (s *statusSource) ObserverStats() watchtree.ObserverStats { return watchtree.ObserverStats{} }

func (s *statusSource) edit(fn func(st *watchtree.StreamStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.st)
}

// cpToken is a resume token of the server's shape at cluster time (t, i).
func cpToken(t, i uint32) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X2B0229296E04", t, i)}})
	if err != nil {
		panic(err)
	}
	return b
}

// TestCheckpointAgeAfterABurst: watchtree.checkpoint.age has the Prometheus adapter's meaning
// (one definition, watchtree.CheckpointAges): 0 once a write covers every settled event, also while the
// settled position moves on with idle post-batch tokens and the write grows old; the age of the
// unwritten settlements otherwise. Before, it was the time since the latest write (26.3 s where
// Prometheus read 0).
func TestCheckpointAgeAfterABurst(t *testing.T) {
	h := newHarness(t, Options{})
	src := &statusSource{st: watchtree.StreamStatus{Name: "burst", State: watchtree.StateRunning,
		CheckpointAt: time.Now().Add(-30 * time.Second), CheckpointSource: "initial", Checkpoint: cpToken(100, 1),
		SettledThrough: bson.Timestamp{T: 100, I: 1}}}
	if err := h.tel.Attach(src); err != nil {
		t.Fatal(err)
	}
	age := func() float64 {
		t.Helper()
		v, ok := value(h.collect(t), metricCheckpointAge, "watchtree.stream", "burst")
		if !ok {
			t.Fatal("no watchtree.checkpoint.age")
		}
		return v
	}
	if v := age(); v != 0 {
		t.Errorf("idle since a write 30 s ago: age %v, want 0", v)
	}
	// A burst settles; no write yet.
	src.edit(func(st *watchtree.StreamStatus) {
		st.Settled, st.Handled, st.SettledThrough = 20, 20, bson.Timestamp{T: 101, I: 20}
	})
	time.Sleep(20 * time.Millisecond) // the age to measure, not a wait for an outcome
	if v := age(); v <= 0 || v > 10 {
		t.Errorf("20 settled, unwritten: age %v, want the little time since the last reading", v)
	}
	// The write covers them; then a no-op's token moves the settled position on.
	h.tel.OnEvent(observe.Checkpointed{Meta: observe.Meta{Stream: "burst"}, Token: cpToken(101, 20), Settled: 20})
	src.edit(func(st *watchtree.StreamStatus) {
		st.Checkpoint, st.CheckpointAt, st.CheckpointSource = cpToken(101, 20), time.Now().Add(-20*time.Second), "event"
		st.SettledThrough = bson.Timestamp{T: 111, I: 1}
	})
	for i := range 3 {
		if v := age(); v != 0 {
			t.Errorf("collection %d after the burst's write: age %v, want 0", i, v)
		}
	}
}
