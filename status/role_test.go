package status

import "testing"

// TestStreamRole: the role the metric adapters label a stream with; a SingleLeader copy that is
// down on this instance (stopped, crashed) is never a leader, or the no-leader alert, which sums
// the leader role over the instances, would see one where none runs.
func TestStreamRole(t *testing.T) {
	for _, c := range []struct {
		name string
		st   Stream
		want string
	}{
		{"all instances", Stream{Mode: ModeAllInstances, State: Running}, RoleAllInstances},
		{"all instances, stopped", Stream{Mode: ModeAllInstances, State: Stopped}, RoleAllInstances},
		{"leader by its lease", Stream{Mode: ModeSingleLeader, State: Running, Lease: &Lease{Role: RoleLeader}}, RoleLeader},
		{"standby state", Stream{Mode: ModeSingleLeader, State: Standby, Lease: &Lease{Role: RoleLeader}}, RoleStandby},
		{"standby by its lease", Stream{Mode: ModeSingleLeader, State: Starting, Lease: &Lease{Role: RoleStandby}}, RoleStandby},
		{"crashed, lease idle", Stream{Mode: ModeSingleLeader, State: Crashed, Lease: &Lease{Role: RoleIdle}}, RoleIdle},
		{"stopped, no lease reported", Stream{Mode: ModeSingleLeader, State: Stopped}, RoleIdle},
		{"crashed, no lease reported", Stream{Mode: ModeSingleLeader, State: Crashed}, RoleIdle},
		{"running, no lease reported", Stream{Mode: ModeSingleLeader, State: Running}, RoleLeader},
	} {
		if got := c.st.Role(); got != c.want {
			t.Errorf("%s: Role() = %q, want %q", c.name, got, c.want)
		}
	}
}
