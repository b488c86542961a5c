package supervisor

import (
	"errors"
	"testing"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// TestSnapshotting: a stream actor that reports a snapshot moves the tree to snapshotting, which
// answers AwaitRunning (the position is fixed); the cursor opening then makes it running; a
// death while snapshotting is a death like any other; the latest SnapshotStatus is in the status.
func TestSnapshotting(t *testing.T) {
	h := scripted(t, func(uint64) action { return actSnapshotting }, nil)
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	child := h.started()
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING); tr.Incarnation != child.incarnation {
		t.Fatalf("snapshotting transition %+v", tr)
	}
	if r := h.request(&messages.AwaitRunning{}); r.GetState() != messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING {
		t.Fatalf("AwaitRunning answered %v, want snapshotting", r.GetState())
	}
	h.tell(h.pid, &messages.SnapshotStatus{SnapshotId: "snap-1", Running: true, RangesTotal: 4, RangesDone: 1})
	if r := h.status(); r.GetSnapshot().GetRangesDone() != 1 || r.GetSnapshot().GetSnapshotId() != "snap-1" {
		t.Fatalf("status snapshot %v", r.GetSnapshot())
	}
	// A stale Snapshotting (an older incarnation) changes nothing.
	h.tell(h.pid, &wire.Snapshotting{Incarnation: child.incarnation - 1})
	h.noTransition()
	h.tell(child.pid, openCmd{})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)

	// Snapshotting again after a restart, then a death during the snapshot: backoff.
	h.tell(child.pid, failCmd{err: errors.New("snapshot read failed")})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	h.fireRestart(h.armed())
	h.await(messages.SupervisorState_SUPERVISOR_STATE_STARTING)
	next := h.started()
	h.await(messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING)
	h.tell(next.pid, failCmd{err: errors.New("snapshot read failed again")})
	if tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF); tr.Attempt != 2 {
		t.Fatalf("a death while snapshotting: attempt %d, want 2 (snapshotting does not reset the counter)", tr.Attempt)
	}
}
