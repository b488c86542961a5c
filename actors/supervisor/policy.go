package supervisor

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/watchtree/watchtree/internal/backoff"
)

// Policy defaults: the zero value of each Policy field means the default below.
const (
	// DefaultInitialDelay is the delay before the first restart.
	DefaultInitialDelay = time.Second
	// DefaultMaxDelay caps every computed delay (before jitter).
	DefaultMaxDelay = 60 * time.Second
	// DefaultMultiplier is the growth factor between consecutive delays.
	DefaultMultiplier = 2.0
	// MinJitteredDelay is the floor of a jittered delay.
	MinJitteredDelay = backoff.MinJittered
)

// Policy is the RestartPolicy as the supervisor applies it (design §3). The root package converts
// its public RestartPolicy into this struct. The zero value of every field means its default, so
// Policy{} restarts forever with delays 1s, 2s, 4s, 8s, 16s, 32s, 60s, 60s, ...
//
// With attempt n counted from 1 (the n-th death since the counter was last reset):
//
//	delay(n) = min(InitialDelay × Multiplier^(n-1), MaxDelay)
//
// and, with Jitter, delay(n) × U(0.8, 1.2), floored at 1ms (so a jittered delay may exceed
// MaxDelay by up to 20%).
type Policy struct {
	// MaxAttempts is how many restarts are attempted after consecutive deaths; 0 (the default)
	// means unlimited. The death that would need attempt MaxAttempts+1 gives up at once, with no
	// further delay: the stream is crashed until an operator starts it. Must be ≥ 0.
	MaxAttempts int
	// InitialDelay is the delay of attempt 1. Default 1s. Must be > 0 when set.
	InitialDelay time.Duration
	// MaxDelay caps the computed delay. Default 60s. Must be > 0 when set.
	MaxDelay time.Duration
	// Multiplier is the factor between consecutive delays. Default 2.0. Must be finite and ≥ 1
	// when set (1 gives a constant delay).
	Multiplier float64
	// Jitter multiplies each delay by a uniform factor in [0.8, 1.2], so streams that died
	// together do not restart in lockstep. Default false.
	Jitter bool
}

// PolicyError names the Policy field that broke a rule. The root package maps it onto its own
// configuration error, prefixing the field with the path of the policy in the stream spec.
type PolicyError struct {
	// Field is the Policy field name, e.g. "Multiplier".
	Field string
	// Rule is the broken rule with the rejected value, e.g. "must be finite and >= 1, got NaN".
	Rule string
}

func (e *PolicyError) Error() string { return "supervisor: Policy." + e.Field + " " + e.Rule }

// Validate checks every rule and returns the broken ones as *PolicyError values joined with
// errors.Join, or nil. Zero values are valid (they mean the defaults).
func (p Policy) Validate() error {
	var errs []error
	if p.MaxAttempts < 0 {
		errs = append(errs, &PolicyError{"MaxAttempts", fmt.Sprintf("must be >= 0, got %d", p.MaxAttempts)})
	}
	if p.InitialDelay < 0 {
		errs = append(errs, &PolicyError{"InitialDelay", fmt.Sprintf("must be > 0, got %v", p.InitialDelay)})
	}
	if p.MaxDelay < 0 {
		errs = append(errs, &PolicyError{"MaxDelay", fmt.Sprintf("must be > 0, got %v", p.MaxDelay)})
	}
	if m := p.Multiplier; math.IsNaN(m) || math.IsInf(m, 0) || (m != 0 && m < 1) {
		errs = append(errs, &PolicyError{"Multiplier", fmt.Sprintf("must be finite and >= 1, got %v", m)})
	}
	return errors.Join(errs...)
}

// WithDefaults returns p with every zero field replaced by its default.
func (p Policy) WithDefaults() Policy {
	if p.InitialDelay == 0 {
		p.InitialDelay = DefaultInitialDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultMultiplier
	}
	return p
}

// Delay returns the delay of attempt n (n ≥ 1; n < 1 is treated as 1) without jitter:
// min(InitialDelay × Multiplier^(n-1), MaxDelay), defaults applied. It never overflows: a
// product beyond MaxDelay (or beyond the range of time.Duration) is MaxDelay.
func (p Policy) Delay(n int) time.Duration {
	p = p.WithDefaults()
	return backoff.Delay(p.InitialDelay, p.MaxDelay, p.Multiplier, n)
}

// JitteredDelay returns Delay(n), multiplied by 0.8 + 0.4×r when Jitter is set, floored at 1ms.
// r is a uniform random number in [0, 1) (values outside [0, 1] are clamped), so the factor
// ranges over [0.8, 1.2].
func (p Policy) JitteredDelay(n int, r float64) time.Duration {
	d := p.Delay(n)
	if !p.Jitter {
		return d
	}
	return backoff.Jitter(d, r)
}
