// Package backoff is the one implementation of the exponential backoff formula. Package policy
// builds the delays of the retry policy (per event, applied by the dispatcher) and the restart
// policy (per stream, applied by the supervisor) on it, and the checkpointer spaces its write
// retries with it, so none of them, nor their documentation, can drift apart.
package backoff

import (
	"math"
	"time"
)

// MinJittered is the floor of a jittered delay.
const MinJittered = time.Millisecond

// Delay returns min(initial × multiplier^(attempt-1), maxDelay). An attempt below 1 counts as 1.
// It never overflows: any product past maxDelay (or NaN) gives maxDelay.
func Delay(initial, maxDelay time.Duration, multiplier float64, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := float64(initial) * math.Pow(multiplier, float64(attempt-1))
	if math.IsNaN(d) || d >= float64(maxDelay) {
		return maxDelay
	}
	return time.Duration(d)
}

// Jitter returns d × (0.8 + 0.4·r), floored at MinJittered: r is a uniform random number in
// [0, 1) (values outside [0, 1] and NaN are clamped), so the factor ranges over [0.8, 1.2]
// (±20%). It never overflows.
func Jitter(d time.Duration, r float64) time.Duration {
	if math.IsNaN(r) || r < 0 {
		r = 0
	} else if r > 1 {
		r = 1
	}
	j := float64(d) * (0.8 + 0.4*r)
	if j >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(j), MinJittered)
}
