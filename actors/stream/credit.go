package stream

import (
	"context"
	"sync"
)

// credit is the dispatcher's unused credit, shared by the actor (which adds every Demand) and
// the reader goroutine (which waits for it and takes what it sends). The reader waits on wake,
// a one-slot channel the actor fills without blocking: no polling, no lost wake-up.
type credit struct {
	mu   sync.Mutex
	n    uint64
	wake chan struct{}
}

func newCredit() *credit { return &credit{wake: make(chan struct{}, 1)} }

// add grants n more events (Demand is additive). Never blocks.
func (c *credit) add(n uint64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.n += n
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// get returns the unused credit.
func (c *credit) get() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// wait blocks until some credit is available and returns it, or returns false when ctx ends.
func (c *credit) wait(ctx context.Context) (uint64, bool) {
	for {
		if n := c.get(); n > 0 {
			return n, true
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// take consumes n events of credit (n never exceeds what wait returned: only the reader takes).
func (c *credit) take(n uint64) {
	c.mu.Lock()
	c.n -= n
	c.mu.Unlock()
}
