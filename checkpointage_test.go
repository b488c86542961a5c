package watchtree_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// resumeToken is a change stream resume token of cluster time {t, i}.
func resumeToken(t, i uint32) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X2B0229296E04", t, i)}})
	if err != nil {
		panic(err)
	}
	return b
}

// TestCheckpointAges walks one stream through the cases of the definition on a fixed clock:
// covered by position, covered by count while idle tokens move the settled position, unwritten
// settlements dated from the last clean reading, a failed write, and counts that restart with
// the tree.
func TestCheckpointAges(t *testing.T) {
	ages := watchtree.NewCheckpointAges()
	t0 := time.Unix(1_800_000_000, 0)
	meta := observe.Meta{Stream: "s"}
	st := watchtree.StreamStatus{Name: "s", SettledThrough: bson.Timestamp{T: 100, I: 1}, Checkpoint: resumeToken(100, 1),
		CheckpointAt: t0.Add(-time.Hour)}
	step := func(what string, at time.Duration, want float64) {
		t.Helper()
		if got := ages.Age(st, t0.Add(at)); got != want {
			t.Errorf("%s: age %v, want %v", what, got, want)
		}
	}
	step("covered by its position, however old the write", 0, 0)
	st.SettledThrough = bson.Timestamp{T: 200, I: 1}
	step("idle tokens moved the settled position", 10*time.Second, 0)
	st.Settled, st.SettledThrough = 5, bson.Timestamp{T: 210, I: 5}
	step("5 settled since the clean reading 10 s ago", 20*time.Second, 10)
	step("still unwritten", 30*time.Second, 20)
	ages.OnEvent(observe.Checkpointed{Meta: meta, Token: resumeToken(210, 5), Settled: 5})
	st.Checkpoint, st.CheckpointAt, st.SettledThrough = resumeToken(210, 5), t0.Add(31*time.Second), bson.Timestamp{T: 220, I: 1}
	step("written, then idle tokens", 40*time.Second, 0)
	ages.OnEvent(observe.CheckpointFailed{Meta: meta, Err: errors.New("down")})
	st.Settled = 6
	step("a settlement after a failed write", 50*time.Second, 10)
	ages.OnEvent(observe.Checkpointed{Meta: meta, Token: resumeToken(221, 1), Settled: 1})
	st.Checkpoint, st.CheckpointAt, st.SettledThrough = resumeToken(221, 1), t0.Add(55*time.Second), bson.Timestamp{T: 221, I: 1}
	step("the retry wrote it", time.Minute, 0)
	st.Settled, st.SettledThrough = 0, bson.Timestamp{T: 230, I: 1}
	step("the tree's counts restarted", 70*time.Second, 0)
	st.Settled = 2
	step("2 settled after the restart", 80*time.Second, 10)
}
