package supervisor

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// TestLifecycleEvents: the transitions become the user's lifecycle events, with the
// transition's time; a stop after a crash reports nothing more.
func TestLifecycleEvents(t *testing.T) {
	at := time.Unix(1700000000, 0)
	cause := errors.New("cursor died")
	historyLost := fmt.Errorf("checkpointer: %w", errors.New("history lost"))
	var l lifecycle
	var got []string
	for _, tr := range []Transition{
		{To: messages.SupervisorState_SUPERVISOR_STATE_STARTING, At: at, Incarnation: 1},
		{To: messages.SupervisorState_SUPERVISOR_STATE_RUNNING, At: at, Incarnation: 1},
		{To: messages.SupervisorState_SUPERVISOR_STATE_BACKOFF, At: at, Attempt: 1, MaxAttempts: 2, Delay: time.Second, Cause: cause, Incarnation: 1},
		{To: messages.SupervisorState_SUPERVISOR_STATE_RUNNING, At: at, Attempt: 1, MaxAttempts: 2, Cause: cause, Incarnation: 2},
		{To: messages.SupervisorState_SUPERVISOR_STATE_BACKOFF, At: at, Attempt: 1, MaxAttempts: 2, Delay: time.Second, Cause: cause, Incarnation: 2},
		{To: messages.SupervisorState_SUPERVISOR_STATE_BACKOFF, At: at, Attempt: 2, MaxAttempts: 2, Delay: 2 * time.Second, Cause: cause, Incarnation: 3},
		{To: messages.SupervisorState_SUPERVISOR_STATE_CRASHED, At: at, Attempt: 3, MaxAttempts: 2, Cause: gaveUp(cause), Incarnation: 4},
		{To: messages.SupervisorState_SUPERVISOR_STATE_CRASHED, At: at, Cause: historyLost, Incarnation: 5},
		// A graceful stop of a crashed stream reports nothing more; of a running one, Graceful.
		{From: messages.SupervisorState_SUPERVISOR_STATE_CRASHED, To: messages.SupervisorState_SUPERVISOR_STATE_STOPPING, At: at, Incarnation: 5},
		{From: messages.SupervisorState_SUPERVISOR_STATE_STOPPING, To: messages.SupervisorState_SUPERVISOR_STATE_STOPPED, At: at, Incarnation: 5},
		{From: messages.SupervisorState_SUPERVISOR_STATE_STOPPED, To: messages.SupervisorState_SUPERVISOR_STATE_STARTING, At: at, Incarnation: 6},
		{From: messages.SupervisorState_SUPERVISOR_STATE_STARTING, To: messages.SupervisorState_SUPERVISOR_STATE_RUNNING, At: at, Incarnation: 6},
		{From: messages.SupervisorState_SUPERVISOR_STATE_RUNNING, To: messages.SupervisorState_SUPERVISOR_STATE_STOPPING, At: at, Incarnation: 6},
		{From: messages.SupervisorState_SUPERVISOR_STATE_STOPPING, To: messages.SupervisorState_SUPERVISOR_STATE_STOPPED, At: at, Incarnation: 6},
	} {
		ev := l.eventOf("s", tr)
		if ev == nil {
			continue
		}
		if m := ev.EventMeta(); m.Stream != "s" || !m.Time.Equal(at) {
			t.Fatalf("%v: meta %+v", ev, m)
		}
		switch ev := ev.(type) {
		case observe.Restarted:
			got = append(got, fmt.Sprintf("restarted %d", ev.Attempt))
		case observe.Stopped:
			s := fmt.Sprintf("stopped %v terminal=%v", ev.Reason, ev.Terminal)
			switch {
			case errors.Is(ev.Cause, streamtree.ErrGaveUp) && errors.Is(ev.Cause, cause):
				s += " gave-up"
			case errors.Is(ev.Cause, historyLost):
				s += " history-lost"
			}
			if ev.Attempt > 0 {
				s += fmt.Sprintf(" attempt %d in %v", ev.Attempt, ev.RestartIn)
			}
			got = append(got, s)
		default:
			got = append(got, fmt.Sprintf("%T", ev))
		}
	}
	want := []string{
		"stopped crashed terminal=false attempt 1 in 1s", "restarted 1", "stopped crashed terminal=false attempt 1 in 1s",
		"stopped crashed terminal=false attempt 2 in 2s",
		"stopped crashed terminal=true gave-up", "stopped crashed terminal=true history-lost", "stopped graceful terminal=false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
}

// TestGaveUpError: the give-up cause matches streamtree.ErrGaveUp and the death's cause, reads as the
// sentinel then the cause, and is not wrapped twice.
func TestGaveUpError(t *testing.T) {
	cause := errors.New("cursor died")
	err := gaveUp(cause)
	if !errors.Is(err, streamtree.ErrGaveUp) || !errors.Is(err, cause) || err.Error() != "watchtree: restart attempts exhausted: cursor died" {
		t.Fatalf("gaveUp = %v", err)
	}
	if again := gaveUp(err); again != err {
		t.Fatalf("wrapped twice: %v", again)
	}
	if gaveUp(nil) != nil {
		t.Fatal("gaveUp(nil) != nil")
	}
}
