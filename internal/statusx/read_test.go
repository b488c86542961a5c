package statusx

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/status"
)

func TestStateNames(t *testing.T) {
	want := map[messages.SupervisorState]status.State{
		messages.SupervisorState_SUPERVISOR_STATE_UNSPECIFIED:  status.Unknown,
		messages.SupervisorState_SUPERVISOR_STATE_STARTING:     "starting",
		messages.SupervisorState_SUPERVISOR_STATE_STANDBY:      "standby",
		messages.SupervisorState_SUPERVISOR_STATE_RUNNING:      "running",
		messages.SupervisorState_SUPERVISOR_STATE_BACKOFF:      "backoff",
		messages.SupervisorState_SUPERVISOR_STATE_STOPPED:      "stopped",
		messages.SupervisorState_SUPERVISOR_STATE_CRASHED:      "crashed",
		messages.SupervisorState_SUPERVISOR_STATE_STOPPING:     "stopping",
		messages.SupervisorState_SUPERVISOR_STATE_SNAPSHOTTING: "snapshotting",
		messages.SupervisorState(99):                           status.Unknown,
	}
	for s, n := range want {
		if got := StateOf(s); got != n {
			t.Errorf("StateOf(%v) = %q, want %q", s, got, n)
		}
	}
	// Every value of the enum has a name: a state added to the protocol must be named here.
	for v := range messages.SupervisorState_name {
		if s := messages.SupervisorState(v); s != messages.SupervisorState_SUPERVISOR_STATE_UNSPECIFIED && StateOf(s) == status.Unknown {
			t.Errorf("%v has no name", s)
		}
	}
}

func TestRead(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).UTC()
	token := []byte{5, 0, 0, 0, 0}
	r := &messages.StatusReply{
		Stream: "orders", State: messages.SupervisorState_SUPERVISOR_STATE_RUNNING, Why: "cursor open",
		Since: timestamppb.New(now.Add(-time.Minute)), Attempt: 1, MaxAttempts: 5, LastCause: "boom",
		Incarnation: 3, Deaths: 2, Restarts: 2, InFlight: 4, ReadThrough: timestamppb.New(now.Add(-2 * time.Second)),
		Settlements: &messages.SettlementCounts{Settled: 20, Handled: 10, Filtered: 3, Unhandled: 2, Skipped: 1, DeadLettered: 3, Dropped: 1},
		Checkpoint:  &messages.CheckpointWritten{Token: token, Source: "event", WrittenAt: timestamppb.New(now)},
		Warnings:    []string{"namespace missing"},
		Snapshot:    &messages.SnapshotStatus{SnapshotId: "s1", Done: true}, OnDemand: &messages.SnapshotStatus{SnapshotId: "o1", Running: true},
		Lease: &messages.LeaseState{Role: messages.LeaseRole_LEASE_ROLE_LEADER, Owner: "a", Holder: "b", Epoch: 7,
			ExpiresAt: timestamppb.New(now.Add(time.Second)), Why: "leader (epoch 7)", Acquisitions: 1, Fenced: 2},
		LastStop: &messages.StopReport{Settled: 9, Unsettled: 1, Drained: true, Released: true, Error: "drain: timeout",
			HeldUpBy: "drain", Took: durationpb.New(3 * time.Second)},
	}
	st := Read(r, Local{Name: "ignored", Mode: status.ModeSingleLeader, Cursor: "dedicated", Warnings: []string{"local"}})
	token[0] = 0 // the reading keeps a copy
	checks := []struct {
		what string
		ok   bool
	}{
		{"local", st.Name == "orders" && st.Mode == status.ModeSingleLeader && st.Cursor == "dedicated"},
		{"state", st.Name == "orders" && st.State == status.Running && st.Why == "cursor open" && st.Since.Equal(now.Add(-time.Minute))},
		{"restarts", st.Attempt == 1 && st.MaxAttempts == 5 && st.NextRetryAt.IsZero() && st.LastCause == "boom"},
		{"counters", st.Incarnation == 3 && st.Deaths == 2 && st.Restarts == 2 && st.InFlight == 4},
		{"dead-lettered includes dropped", st.Settled == 20 && st.Handled == 10 && st.Filtered == 3 && st.Unhandled == 2 && st.Skipped == 1 && st.DeadLettered == 4},
		{"checkpoint", st.Checkpoint[0] == 5 && st.CheckpointSource == "event" && st.CheckpointAt.Equal(now)},
		{"snapshots", st.Snapshot != nil && st.Snapshot.ID == "s1" && st.Snapshot.Done && st.OnDemand != nil && st.OnDemand.ID == "o1" && st.OnDemand.Running},
		{"warnings, the supervisor's first", slices.Equal(st.Warnings, []string{"namespace missing", "local"})},
		{"lease", st.Leads() && st.Lease.Instance == "a" && st.Lease.Owner == "b" && st.Lease.Epoch == 7 &&
			st.Lease.ExpiresAt.Equal(now.Add(time.Second)) && st.Lease.Acquisitions == 1 && st.Lease.Fenced == 2},
		{"stop", st.LastStop.Failed() && st.LastStop.TimedOut() && st.LastStop.Released && st.LastStop.Took == 3*time.Second},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: %+v", c.what, st)
		}
	}
	if lag, ok := st.Lag(now); !ok || lag != 2*time.Second {
		t.Errorf("lag = %v, %v", lag, ok)
	}
	if lag, ok := st.Lag(now.Add(-time.Hour)); !ok || lag != 0 {
		t.Errorf("lag behind the clock = %v, %v; want 0", lag, ok)
	}

	// What a reply leaves unset reads as nothing: zero times, no lease, no stop, no lag.
	empty := Read(&messages.StatusReply{Checkpoint: &messages.CheckpointWritten{Source: "initial"}}, Local{Name: "s"})
	if empty.Name != "s" || empty.State != status.Unknown || !empty.Since.IsZero() || empty.Lease != nil || empty.LastStop != nil ||
		empty.Checkpoint != nil || empty.CheckpointSource != "initial" || !empty.CheckpointAt.IsZero() || empty.Leads() ||
		empty.Warnings != nil || empty.Snapshot != nil || empty.OnDemand != nil {
		t.Errorf("empty reply: %+v", empty)
	}
	if _, ok := empty.Lag(now); ok {
		t.Error("an unset read_through has a lag")
	}
	// No reply: the supervisor is not running, so the stream is stopped, with the one reason.
	if st := Read(nil, Local{Name: "s", Mode: status.ModeAllInstances, Warnings: []string{"w"}}); st.Name != "s" || st.State != status.Stopped ||
		st.Why != NotRunningWhy || st.Mode != status.ModeAllInstances || !slices.Equal(st.Warnings, []string{"w"}) {
		t.Errorf("nil reply: %+v", st)
	}
	var none *status.Stop
	if none.Failed() || none.TimedOut() {
		t.Error("no stop report failed")
	}
	if s := (&status.Stop{Error: "flush: refused"}); !s.Failed() || s.TimedOut() {
		t.Errorf("an error without a held-up step: failed %v, timed out %v", s.Failed(), s.TimedOut())
	}
}

func TestLeaseRoles(t *testing.T) {
	for role, want := range map[messages.LeaseRole]string{
		messages.LeaseRole_LEASE_ROLE_UNSPECIFIED: status.RoleIdle,
		messages.LeaseRole_LEASE_ROLE_IDLE:        status.RoleIdle,
		messages.LeaseRole_LEASE_ROLE_STANDBY:     status.RoleStandby,
		messages.LeaseRole_LEASE_ROLE_LEADER:      status.RoleLeader,
	} {
		st := Read(&messages.StatusReply{Lease: &messages.LeaseState{Role: role}}, Local{})
		if st.Lease.Role != want || st.Leads() != (want == status.RoleLeader) {
			t.Errorf("%v: role %q, leads %v", role, st.Lease.Role, st.Leads())
		}
	}
}

// SnapshotOf copies every field of the report, the unset timestamps and durations reading as
// zero, and a nil report as the zero status.
func TestSnapshotOf(t *testing.T) {
	if got := SnapshotOf(nil); got != (observe.SnapshotStatus{}) {
		t.Errorf("SnapshotOf(nil) = %+v, want the zero status", got)
	}
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := &messages.SnapshotStatus{SnapshotId: "s1", Reason: "on-demand", Running: true, Resumed: true,
		RangesDone: 2, RangesTotal: 4, Documents: 10, EstimatedTotal: 40, DeadLettered: 1, Rate: 2.5,
		Eta: durationpb.New(12 * time.Second), StartedAt: timestamppb.New(started),
		OplogWindow: durationpb.New(time.Hour), AtRisk: true, Warning: "w", Error: "e",
		OnDemand: true, Phase: "running", ChunksDone: 3, Dropped: 5}
	want := observe.SnapshotStatus{ID: "s1", Reason: "on-demand", Running: true, Resumed: true,
		RangesDone: 2, RangesTotal: 4, Documents: 10, EstimatedTotal: 40, DeadLettered: 1, Rate: 2.5,
		ETA: 12 * time.Second, StartedAt: started, OplogWindow: time.Hour, AtRisk: true, Warning: "w",
		Error: "e", Phase: "running", ChunksDone: 3, Dropped: 5}
	got := SnapshotOf(st)
	if !got.StartedAt.Equal(want.StartedAt) || !got.DoneAt.IsZero() {
		t.Errorf("StartedAt, DoneAt = %v, %v; want %v, zero", got.StartedAt, got.DoneAt, want.StartedAt)
	}
	got.StartedAt, want.StartedAt = time.Time{}, time.Time{}
	if got != want {
		t.Errorf("SnapshotOf = %+v\nwant          %+v", got, want)
	}
}
