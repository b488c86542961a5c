package treekit

import "github.com/watchtree/watchtree/internal/clock"

// StopTimer stops *t, if any, and clears it, so that the field tells whether a timer is armed.
func StopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
