package watchtree

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/clock"
)

// TestTransitionMapping: supervisor transitions become Observer events and the status cache.
func TestTransitionMapping(t *testing.T) {
	obs := &obsRecorder{}
	rt := &Runtime{clk: clock.Real(), log: zap.NewNop(), obs: newSafeObserver(obs, 0, nil)}
	e := &streamEntry{rt: rt, name: "s", log: zap.NewNop()}
	at := time.Unix(1700000000, 0)
	cause := errors.New("cursor died")
	for _, tr := range []supervisor.Transition{
		{To: supervisor.StateStarting, At: at, Incarnation: 1},
		{To: supervisor.StateRunning, At: at, Incarnation: 1},
		{To: supervisor.StateBackoff, At: at, Attempt: 1, MaxAttempts: 2, Delay: time.Second, Cause: cause, Incarnation: 1},
		{To: supervisor.StateRunning, At: at, Attempt: 1, MaxAttempts: 2, Cause: cause, Incarnation: 2},
		{To: supervisor.StateBackoff, At: at, Attempt: 1, MaxAttempts: 2, Delay: time.Second, Cause: cause, Incarnation: 2},
		{To: supervisor.StateBackoff, At: at, Attempt: 2, MaxAttempts: 2, Delay: 2 * time.Second, Cause: cause, Incarnation: 3},
		{To: supervisor.StateCrashed, At: at, Attempt: 3, MaxAttempts: 2, Cause: cause, Incarnation: 4},
		{To: supervisor.StateCrashed, At: at, Cause: &terminalError{sentinel: ErrHistoryLost, cause: cause}, Incarnation: 5},
		// A graceful stop of a crashed stream reports nothing more; of a running one, Graceful.
		{From: supervisor.StateCrashed, To: supervisor.StateStopping, At: at, Incarnation: 5},
		{From: supervisor.StateStopping, To: supervisor.StateStopped, At: at, Incarnation: 5},
		{From: supervisor.StateStopped, To: supervisor.StateStarting, At: at, Incarnation: 6},
		{From: supervisor.StateStarting, To: supervisor.StateRunning, At: at, Incarnation: 6},
		{From: supervisor.StateRunning, To: supervisor.StateStopping, At: at, Incarnation: 6},
		{From: supervisor.StateStopping, To: supervisor.StateStopped, At: at, Incarnation: 6},
	} {
		e.onTransition(tr)
	}
	if !errors.Is(e.lastCause, ErrHistoryLost) {
		t.Fatalf("lastCause = %v, want the history-lost cause kept for Spawn's error", e.lastCause)
	}
	if err := rt.obs.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range obs.all() {
		switch ev := ev.(type) {
		case Restarted:
			got = append(got, fmt.Sprintf("restarted %d", ev.Attempt))
		case Stopped:
			s := fmt.Sprintf("stopped %v terminal=%v", ev.Reason, ev.Terminal)
			switch {
			case errors.Is(ev.Cause, ErrGaveUp) && errors.Is(ev.Cause, cause):
				s += " gave-up"
			case errors.Is(ev.Cause, ErrHistoryLost):
				s += " history-lost"
			}
			got = append(got, s)
		default:
			got = append(got, fmt.Sprintf("%T", ev))
		}
	}
	want := []string{
		"stopped crashed terminal=false", "restarted 1", "stopped crashed terminal=false", "stopped crashed terminal=false",
		"stopped crashed terminal=true gave-up", "stopped crashed terminal=true history-lost", "stopped graceful terminal=false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
}
