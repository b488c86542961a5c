package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/messages"
)

// TestTransitionKeepsTheCause: a death's cause is kept for Spawn's error, the give-up's with
// streamtree.ErrGaveUp as the supervisor wrapped it. (The supervisor reports the Observer events
// itself.)
func TestTransitionKeepsTheCause(t *testing.T) {
	e := &Entry{name: "s", log: zap.NewNop()}
	at := time.Unix(1700000000, 0)
	cause := fmt.Errorf("cursor died: %w", streamtree.ErrGaveUp)
	for _, tr := range []supervisor.Transition{
		{To: messages.SupervisorState_SUPERVISOR_STATE_STARTING, At: at, Incarnation: 1},
		{To: messages.SupervisorState_SUPERVISOR_STATE_BACKOFF, At: at, Attempt: 1, Delay: time.Second, Cause: errors.New("first"), Incarnation: 1},
		{To: messages.SupervisorState_SUPERVISOR_STATE_CRASHED, At: at, Attempt: 2, MaxAttempts: 1, Cause: cause, Incarnation: 2},
		{From: messages.SupervisorState_SUPERVISOR_STATE_CRASHED, To: messages.SupervisorState_SUPERVISOR_STATE_STOPPING, At: at, Incarnation: 2},
		{From: messages.SupervisorState_SUPERVISOR_STATE_STOPPING, To: messages.SupervisorState_SUPERVISOR_STATE_STOPPED, At: at, Incarnation: 2},
	} {
		e.onTransition(tr)
	}
	if !errors.Is(e.lastCause, streamtree.ErrGaveUp) || e.lastCause != cause {
		t.Fatalf("lastCause = %v, want the give-up cause kept for Spawn's error", e.lastCause)
	}
}
