package policy

import "time"

// The tree's plumbing over the policies is package-level functions, not methods, so that the
// methods are only what the root's types delegate to (Validate, String).

// defaulted is a policy that fills its zero fields in: Retry, Restart, Checkpoint, Lease and
// Snapshot.
type defaulted[P any] interface {
	withDefaults() P
}

// WithDefaults returns p with every zero field replaced by the default its field's godoc states
// (Restart.MaxAttempts stays 0, unlimited; Checkpoint.MaxUnflushed follows SaveEvery). Set fields
// are kept as they are, valid or not.
func WithDefaults[P defaulted[P]](p P) P { return p.withDefaults() }

// validated is a policy that reports its broken rules into an Errors collector: every policy
// with a Validate method.
type validated interface {
	validateInto(c *Errors, field string)
}

// ValidateInto adds the broken rules of p to c, naming each field field.<Name> (e.g.
// "Retry.MaxAttempts" for field "Retry"), or field itself for a StartPosition or a HistoryLost.
// p.Validate() is ValidateInto under the root package's type name ("RetryPolicy") on a fresh
// collector.
func ValidateInto(c *Errors, field string, p validated) { p.validateInto(c, field) }

// validate is every policy's Validate: p's broken rules on a fresh collector, each field named
// name.<Name> (name is the root package's type name, "RetryPolicy"), joined, or nil.
func validate(p validated, name string) error {
	c := NewErrors("")
	p.validateInto(c, name)
	return c.Err()
}

// backoffPolicy is a policy with a delay formula: Retry or Restart.
type backoffPolicy interface {
	Retry | Restart
	nthDelay(attempt int, rnd func() float64) time.Duration
}

// Delay returns the delay of the attempt-th attempt (1-based; below 1 counts as 1) of p: for a
// Retry the wait after the attempt-th failed handler call, for a Restart the wait before the
// attempt-th restart, following the formula on the type with zero fields replaced by their
// defaults. rnd returns a uniform float in [0, 1) and is called only when the delay is jittered
// (Retry unless DisableJitter, Restart when Jitter); nil means math/rand/v2.Float64. Delay never
// overflows: a huge exponent gives MaxDelay.
func Delay[P backoffPolicy](p P, attempt int, rnd func() float64) time.Duration {
	return p.nthDelay(attempt, rnd)
}
