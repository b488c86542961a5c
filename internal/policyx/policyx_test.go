package policyx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"github.com/watchtree/watchtree/policy"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestHook: every function reaches policy's own through the hook (a field wired to the wrong
// function, or a struct type that drifted from policy's, fails here or panics at init).
func TestHook(t *testing.T) {
	if got := policyx.WithDefaults(policy.Retry{}).InitialDelay; got != 500*time.Millisecond {
		t.Errorf("WithDefaults(Retry{}).InitialDelay = %v, want 500ms", got)
	}
	if got := policyx.WithDefaults(policy.Snapshot{}).BatchSize; got != 1000 {
		t.Errorf("WithDefaults(Snapshot{}).BatchSize = %d, want 1000", got)
	}
	if got := policyx.Delay(policy.Retry{DisableJitter: true}, 2, nil); got != time.Second {
		t.Errorf("Delay(Retry, 2) = %v, want 1s", got)
	}
	if got := policyx.Delay(policy.Restart{}, 3, nil); got != 4*time.Second {
		t.Errorf("Delay(Restart, 3) = %v, want 4s", got)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	p := policy.At(at)
	if k := policyx.StartKindOf(p); k != policyx.StartAt {
		t.Errorf("StartKindOf(At) = %v", k)
	}
	if got, ok := policyx.StartTime(p); !ok || !got.Equal(at) {
		t.Errorf("StartTime(At) = %v, %v", got, ok)
	}
	if _, ok := policyx.StartTime(policy.Latest); ok {
		t.Error("StartTime(Latest) reports a time")
	}
	if got := policyx.OperationTime(p); got != (bson.Timestamp{T: uint32(at.Unix())}) {
		t.Errorf("OperationTime(At) = %v", got)
	}
	rebuilt := errors.New("rebuilt")
	h := policy.Rebuild(func(context.Context) error { return rebuilt })
	if policyx.HistoryLostKindOf(h) != policyx.HistoryRebuild || !policyx.HistoryLostSet(h) ||
		policyx.HistoryLostSet(policy.HistoryLost{}) {
		t.Errorf("Rebuild reads as kind %v, set %v", policyx.HistoryLostKindOf(h), policyx.HistoryLostSet(h))
	}
	if err := policyx.RebuildFunc(h)(context.Background()); err != rebuilt {
		t.Errorf("RebuildFunc(Rebuild(fn)) is not fn: %v", err)
	}
	if !policyx.SnapshotEnabled(policy.Snapshot{Mode: policy.SnapshotInitial}) || policyx.SnapshotEnabled(policy.Snapshot{}) {
		t.Error("SnapshotEnabled is wrong for SnapshotInitial or SnapshotNever")
	}
	if f, err := policyx.MarshalFilter(policy.Snapshot{Filter: bson.D{{Key: "a", Value: 1}}}); err != nil || len(f) == 0 {
		t.Errorf("MarshalFilter = %v, %v", f, err)
	}
	c := configcheck.NewErrors("Config.")
	policyx.ValidateInto(c, "Retry", policy.Retry{Multiplier: 0.5})
	policyx.ValidateStartInto(c, "Start", policy.Checkpoint{Ephemeral: true}, p)
	const want = "watchtree: Config.Retry.Multiplier must be finite and >= 1, got 0.5\n" +
		"watchtree: Config.Start must be Resume or Latest when Checkpoint.Ephemeral is set (an ephemeral stream starts at the current position on every start), got At(2026-01-02T03:04:05.000000006Z)"
	if err := c.Err(); err == nil || err.Error() != want {
		t.Errorf("collector:\n%v\nwant:\n%s", err, want)
	}
}

// TestKinds: policyx's kinds mirror policy's unexported ones value for value, so that every
// constructor reads as its own kind.
func TestKinds(t *testing.T) {
	starts := []struct {
		p    policy.StartPosition
		want policyx.StartKind
	}{{policy.Resume, policyx.StartResume}, {policy.Latest, policyx.StartLatest}, {policy.At(time.Unix(1, 0)), policyx.StartAt}}
	for _, s := range starts {
		if got := policyx.StartKindOf(s.p); got != s.want {
			t.Errorf("StartKindOf(%v) = %d, want %d", s.p, got, s.want)
		}
	}
	losts := []struct {
		p    policy.HistoryLost
		want policyx.HistoryLostKind
	}{
		{policy.HistoryLost{}, policyx.HistoryFail},
		{policy.Fail, policyx.HistoryFail},
		{policy.ResumeFromNow, policyx.HistoryResumeFromNow},
		{policy.Rebuild(func(context.Context) error { return nil }), policyx.HistoryRebuild},
		{policy.RebuildFromSnapshot, policyx.HistoryRebuildFromSnapshot},
	}
	for _, l := range losts {
		if got := policyx.HistoryLostKindOf(l.p); got != l.want {
			t.Errorf("HistoryLostKindOf(%v) = %d, want %d", l.p, got, l.want)
		}
	}
}
