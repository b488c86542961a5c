package statusx

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/status"
)

// TestRowReadsTheLease: a status with a lease, as the leader actor reports it, fills the row's
// role and lease columns (the role is the lease's: leader, standby or idle); a status without
// one leaves the role empty: the role is not the mode.
func TestRowReadsTheLease(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).UTC()
	expires := now.Add(10 * time.Second)
	lease := &messages.LeaseState{Role: messages.LeaseRole_LEASE_ROLE_LEADER, Owner: "node-a", Holder: "node-a",
		Epoch: 42, ExpiresAt: timestamppb.New(expires)}
	row := func(mode string, l *messages.LeaseState) *messages.StreamRow {
		return status.Row(Read(&messages.StatusReply{Stream: "s", Lease: l}, Local{Mode: mode}), now)
	}
	r := row(status.ModeSingleLeader, lease)
	if r.GetMode() != status.ModeSingleLeader || r.GetRole() != status.RoleLeader || r.GetLeaseOwner() != "node-a" || r.GetLeaseEpoch() != 42 ||
		!r.GetLeaseExpiresAt().AsTime().Equal(expires) {
		t.Errorf("leader: row = %v", r)
	}
	lease.Role, lease.Holder = messages.LeaseRole_LEASE_ROLE_STANDBY, "node-b"
	if r := row(status.ModeSingleLeader, lease); r.GetRole() != status.RoleStandby || r.GetLeaseOwner() != "node-b" {
		t.Errorf("standby: row = %v", r)
	}
	lease.Role = messages.LeaseRole_LEASE_ROLE_IDLE
	if r := row(status.ModeSingleLeader, lease); r.GetRole() != status.RoleIdle {
		t.Errorf("idle: role = %q, want idle", r.GetRole())
	}
	if r := row(status.ModeAllInstances, nil); r.GetRole() != "" || r.GetLeaseOwner() != "" || r.GetLeaseExpiresAt() != nil {
		t.Errorf("no lease: %v", r)
	}
}

// TestRowNoteCarriesWarnings: the supervisor's warnings (a collection that does not exist) and
// the instance's (a Shared stream on a dedicated cursor) reach the row's note, in that order;
// a stream without warnings has no note.
func TestRowNoteCarriesWarnings(t *testing.T) {
	r := &messages.StatusReply{Stream: "s", Warnings: []string{"namespace db.ordrs does not exist"}}
	row := status.Row(Read(r, Local{Warnings: []string{"Cursor Shared: the stream reads on a dedicated cursor: x"}}), time.Now())
	if want := "namespace db.ordrs does not exist; Cursor Shared: the stream reads on a dedicated cursor: x"; row.GetNote() != want {
		t.Fatalf("note %q, want %q", row.GetNote(), want)
	}
	if quiet := status.Row(Read(&messages.StatusReply{Stream: "s"}, Local{}), time.Now()); quiet.GetNote() != "" {
		t.Fatalf("note %q without warnings", quiet.GetNote())
	}
}

// TestRowOfAStreamNotRunning: a stream whose supervisor is not running is a stopped row with
// the one reason, the same the Handle reports.
func TestRowOfAStreamNotRunning(t *testing.T) {
	row := status.Row(Read(nil, Local{Name: "s", Mode: status.ModeAllInstances, Cursor: "dedicated"}), time.Now())
	if row.GetName() != "s" || row.GetState() != string(status.Stopped) || row.GetWhy() != NotRunningWhy ||
		row.GetMode() != status.ModeAllInstances || row.GetCursor() != "dedicated" || row.GetLag() != nil || row.GetSince() != nil {
		t.Fatalf("row = %v", row)
	}
}
