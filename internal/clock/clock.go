// Package clock is the time source of the actors. Production code uses Real; tests use a Fake
// whose time only moves when the test calls Advance, so restart delays, flush intervals and lease
// timers can be asserted exactly and without sleeping.
package clock

import "time"

// Clock tells the time and schedules callbacks. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or on the goroutine that advances the time
	// (Fake) once d has elapsed. A d ≤ 0 is due at once. The returned Timer cancels the call.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started yet. It reports whether it did so: false
	// means the call already ran (or is running) or the timer was already stopped.
	Stop() bool
}

// Real returns the wall clock: time.Now and time.AfterFunc.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
