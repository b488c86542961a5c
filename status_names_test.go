package watchtree

import (
	"testing"

	"github.com/watchtree/watchtree/status"
)

// TestModeNamesAreTheStatusNames: StreamStatus.Mode and the console's mode column carry the
// names package status declares; Mode.String must spell them the same.
func TestModeNamesAreTheStatusNames(t *testing.T) {
	for m, want := range map[Mode]string{AllInstances: status.ModeAllInstances, SingleLeader: status.ModeSingleLeader} {
		if m.String() != want {
			t.Errorf("%d.String() = %q, want %q (package status)", int(m), m.String(), want)
		}
	}
}
