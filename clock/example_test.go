package clock_test

import (
	"fmt"
	"time"

	"github.com/watchtree/watchtree/clock"
)

// A test drives a Fake: nothing fires until it advances the time, and then every due timer
// fires in deadline order on the test's goroutine.
func ExampleFake() {
	c := clock.NewFake(time.Time{})
	c.AfterFunc(2*time.Second, func() { fmt.Println("retry at +2s") })
	c.AfterFunc(time.Second, func() { fmt.Println("flush at +1s") })
	next, _ := c.NextDeadline()
	fmt.Println("pending:", c.Pending(), "next in", next)
	c.Advance(2 * time.Second)
	fmt.Println("pending:", c.Pending(), "mono:", clock.Mono(c))
	// Output:
	// pending: 2 next in 1s
	// flush at +1s
	// retry at +2s
	// pending: 0 mono: 2s
}
