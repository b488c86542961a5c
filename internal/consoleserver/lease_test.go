package consoleserver

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/internal/streamstatus"
	"github.com/watchtree/watchtree/messages"
)

// TestFillRowReadsTheLease: a status with a lease, as the leader actor reports it, fills the
// row's role and lease columns (the role is the lease's: leader, standby or idle); a status
// without one leaves the role empty: the role is not the mode.
func TestFillRowReadsTheLease(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).UTC()
	expires := now.Add(10 * time.Second)
	lease := &messages.LeaseState{Role: messages.LeaseRole_LEASE_ROLE_LEADER, Owner: "node-a", Holder: "node-a",
		Epoch: 42, ExpiresAt: timestamppb.New(expires)}
	fill := func(mode string, l *messages.LeaseState) *messages.StreamRow {
		row := &messages.StreamRow{Mode: mode}
		fillRow(row, streamstatus.Read(&messages.StatusReply{Stream: "s", Lease: l}), now)
		return row
	}
	row := fill("SingleLeader", lease)
	if row.GetRole() != "leader" || row.GetLeaseOwner() != "node-a" || row.GetLeaseEpoch() != 42 || !row.GetLeaseExpiresAt().AsTime().Equal(expires) {
		t.Errorf("leader: row = %v", row)
	}
	lease.Role, lease.Holder = messages.LeaseRole_LEASE_ROLE_STANDBY, "node-b"
	if row := fill("SingleLeader", lease); row.GetRole() != "standby" || row.GetLeaseOwner() != "node-b" {
		t.Errorf("standby: row = %v", row)
	}
	lease.Role = messages.LeaseRole_LEASE_ROLE_IDLE
	if row := fill("SingleLeader", lease); row.GetRole() != "idle" {
		t.Errorf("idle: role = %q, want idle", row.GetRole())
	}
	if row := fill("AllInstances", nil); row.GetRole() != "" || row.GetLeaseOwner() != "" || row.GetLeaseExpiresAt() != nil {
		t.Errorf("no lease: %v", row)
	}
}
