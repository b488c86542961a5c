// Package clock is the time source of watchtree's runtime and actors: watchtree.Config.Clock
// (and each actor's Config.Clock) takes a Clock. Production code uses Real, the default. Tests,
// the library's and its users', use a Fake, whose time only moves when the test calls Advance,
// so restart delays, flush intervals, retries and lease timers can be asserted exactly and
// without sleeping. A lease's validity is measured on Mono, a monotonic reading that a jump of
// the wall time (Fake.Jump) does not move.
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

// Monotonic is a Clock with a monotonic reading of its own: Mono is the time elapsed since an
// arbitrary origin, on the same time base as AfterFunc, and no change of the wall time (Now
// jumping or drifting) moves it.
type Monotonic interface {
	// Mono returns the time elapsed since the clock's origin; it never decreases.
	Mono() time.Duration
}

// Mono returns c's monotonic reading: c.Mono() when c implements Monotonic (Real, Fake), else
// the process's monotonic clock. Whoever measures a deadline that must hold however Now jumps
// (a lease's validity) reads it here, never by subtracting two Now readings: an injected
// clock's Now may jump, and its readings carry no monotonic reading as time.Now's do.
func Mono(c Clock) time.Duration {
	if m, ok := c.(Monotonic); ok {
		return m.Mono()
	}
	return time.Since(origin)
}

// origin is the process's monotonic origin of Mono.
var origin = time.Now()

// Real returns the wall clock: time.Now and time.AfterFunc.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Mono reads the process's monotonic clock.
func (realClock) Mono() time.Duration { return time.Since(origin) }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
