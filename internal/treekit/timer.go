package treekit

import (
	"context"
	"time"

	"github.com/watchtree/watchtree/clock"
)

// StopTimer stops *t, if any, and clears it, so that the field tells whether a timer is armed.
func StopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// Sleep waits d on clk (the injected clock, so that tests drive it), or until ctx ends; it
// reports false in the latter case. It is for retry loops on an actor's I/O goroutine.
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	ch := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
