package policy

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/watchtree/watchtree/internal/backoff"
)

// Defaults of Retry and Restart: the zero value of a field means the default below.
const (
	// defaultRetryMaxAttempts is the default Retry.MaxAttempts (handler calls per event).
	defaultRetryMaxAttempts = 3
	// defaultRetryInitialDelay is the default Retry.InitialDelay.
	defaultRetryInitialDelay = 500 * time.Millisecond
	// defaultRetryMaxDelay is the default Retry.MaxDelay.
	defaultRetryMaxDelay = 30 * time.Second
	// defaultRetryMultiplier is the default Retry.Multiplier.
	defaultRetryMultiplier = 2.0

	// defaultRestartInitialDelay is the default Restart.InitialDelay.
	defaultRestartInitialDelay = time.Second
	// defaultRestartMaxDelay is the default Restart.MaxDelay.
	defaultRestartMaxDelay = 60 * time.Second
	// defaultRestartMultiplier is the default Restart.Multiplier.
	defaultRestartMultiplier = 2.0

	// minJitteredDelay is the floor of a jittered delay of Retry and Restart.
	minJitteredDelay = backoff.MinJittered
)

// Retry is the dispatcher's form of watchtree.RetryPolicy (dispatcher.Config.Retry): the same
// fields, converted with Retry(p). After the n-th failed attempt of an event its lane waits
// Delay(p, n) = min(InitialDelay × Multiplier^(n-1), MaxDelay), jittered by U(0.8, 1.2) and
// floored at 1ms unless DisableJitter is set. watchtree.RetryPolicy documents which
// errors skip the remaining attempts and what happens when they run out.
type Retry struct {
	// MaxAttempts is the number of handler calls per event, including the first. Default 3;
	// 1 means no retry. Must be >= 0; 0 means the default.
	MaxAttempts int
	// InitialDelay is the delay after the first failed attempt. Default 500ms. Must be >= 0;
	// 0 means the default.
	InitialDelay time.Duration
	// MaxDelay caps the delay before jitter. Default 30s. Must be >= 0 (0 means the default)
	// and, once defaulted, >= InitialDelay.
	MaxDelay time.Duration
	// Multiplier is the growth factor between consecutive delays. Default 2.0. Must be finite
	// and >= 1; 0 means the default.
	Multiplier float64
	// DisableJitter turns the ±20% jitter off. Default false: jitter on.
	DisableJitter bool
}

// withDefaults returns p with every zero field replaced by its default.
func (p Retry) withDefaults() Retry {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = defaultRetryMaxAttempts
	}
	retryCurve.fill(&p.InitialDelay, &p.MaxDelay, &p.Multiplier)
	return p
}

// Validate checks p. The error names the field and the rule ("RetryPolicy.Multiplier must be
// finite and >= 1, got 0.5"); it is a *configerr.Error (several are joined with errors.Join) and
// matches configerr.ErrInvalid.
func (p Retry) Validate() error {
	c := NewErrors("")
	p.validateInto(c, "RetryPolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>, e.g.
// "Retry.MaxAttempts" for field "Retry".
func (p Retry) validateInto(c *Errors, field string) {
	if p.MaxAttempts < 0 {
		c.Add(field+".MaxAttempts", "must be >= 1 (0 means the default %d), got %d", defaultRetryMaxAttempts, p.MaxAttempts)
	}
	retryCurve.validate(c, field, p.InitialDelay, p.MaxDelay, p.Multiplier)
}

// nthDelay is Delay of a Retry: the delay after the attempt-th failed attempt, jittered unless
// DisableJitter is set.
func (p Retry) nthDelay(attempt int, rnd func() float64) time.Duration {
	p = p.withDefaults()
	return delay(p.InitialDelay, p.MaxDelay, p.Multiplier, attempt, !p.DisableJitter, rnd)
}

// Restart is the supervisor's form of watchtree.RestartPolicy (supervisor.Config.Policy): the
// same fields, converted with Restart(p). Before the attempt-th restart of a stream the
// supervisor waits Delay(p, attempt) = min(InitialDelay × Multiplier^(attempt-1), MaxDelay),
// jittered by U(0.8, 1.2) and floored at 1ms when Jitter is set.
// watchtree.RestartPolicy documents what counts as a death and what giving up does.
type Restart struct {
	// MaxAttempts is the number of consecutive restarts before giving up. Default 0: unlimited.
	// Must be >= 0.
	MaxAttempts int
	// InitialDelay is the delay before the first restart. Default 1s. Must be >= 0; 0 means the
	// default.
	InitialDelay time.Duration
	// MaxDelay caps the delay before jitter. Default 60s. Must be >= 0 (0 means the default)
	// and, once defaulted, >= InitialDelay.
	MaxDelay time.Duration
	// Multiplier is the growth factor between consecutive delays. Default 2.0. Must be finite
	// and >= 1; 0 means the default.
	Multiplier float64
	// Jitter multiplies every delay by U(0.8, 1.2) (±20%). Default false.
	Jitter bool
}

// withDefaults returns p with every zero field replaced by its default. MaxAttempts stays 0
// (unlimited) when unset.
func (p Restart) withDefaults() Restart {
	restartCurve.fill(&p.InitialDelay, &p.MaxDelay, &p.Multiplier)
	return p
}

// Validate checks p. The error names the field and the rule ("RestartPolicy.MaxAttempts must be
// >= 0 ..."); it is a *configerr.Error (several are joined with errors.Join) and matches
// configerr.ErrInvalid.
func (p Restart) Validate() error {
	c := NewErrors("")
	p.validateInto(c, "RestartPolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>, e.g.
// "Restart.Multiplier" for field "Restart".
func (p Restart) validateInto(c *Errors, field string) {
	if p.MaxAttempts < 0 {
		c.Add(field+".MaxAttempts", "must be >= 0 (0 means unlimited), got %d", p.MaxAttempts)
	}
	restartCurve.validate(c, field, p.InitialDelay, p.MaxDelay, p.Multiplier)
}

// nthDelay is Delay of a Restart: the delay before the attempt-th restart, jittered only when
// Jitter is set.
func (p Restart) nthDelay(attempt int, rnd func() float64) time.Duration {
	p = p.withDefaults()
	return delay(p.InitialDelay, p.MaxDelay, p.Multiplier, attempt, p.Jitter, rnd)
}

// curve holds the defaults of the delay fields Retry and Restart share (InitialDelay, MaxDelay,
// Multiplier): the two policies differ in these values only, not in how they fill or check
// the fields.
type curve struct {
	initial, maxDelay time.Duration
	mult              float64
}

var (
	retryCurve   = curve{defaultRetryInitialDelay, defaultRetryMaxDelay, defaultRetryMultiplier}
	restartCurve = curve{defaultRestartInitialDelay, defaultRestartMaxDelay, defaultRestartMultiplier}
)

// fill replaces the zero fields by the curve's defaults.
func (d curve) fill(initial, maxDelay *time.Duration, mult *float64) {
	if *initial == 0 {
		*initial = d.initial
	}
	if *maxDelay == 0 {
		*maxDelay = d.maxDelay
	}
	if *mult == 0 {
		*mult = d.mult
	}
}

// validate checks the delay and multiplier fields. The cross-field rule MaxDelay >=
// InitialDelay is checked on defaulted values, and only when both delays are themselves valid.
func (d curve) validate(c *Errors, field string, initial, maxDelay time.Duration, mult float64) {
	ok := true
	if initial < 0 {
		c.Add(field+".InitialDelay", "must be > 0 (0 means the default %v), got %v", d.initial, initial)
		ok = false
	}
	if maxDelay < 0 {
		c.Add(field+".MaxDelay", "must be > 0 (0 means the default %v), got %v", d.maxDelay, maxDelay)
		ok = false
	}
	if math.IsNaN(mult) || math.IsInf(mult, 0) || (mult != 0 && mult < 1) {
		c.Add(field+".Multiplier", "must be finite and >= 1, got %v", mult)
	}
	if !ok {
		return
	}
	i, m := initial, maxDelay
	d.fill(&i, &m, &mult)
	if m < i {
		suffix := ""
		if maxDelay == 0 {
			suffix = " (the default)"
		}
		c.Add(field+".MaxDelay", "must be >= InitialDelay (%v), got %v%s", i, m, suffix)
	}
}

// delay is the formula of Retry and Restart on defaulted fields: internal/backoff's
// min(initial × mult^(attempt-1), maxDelay), then, with jitter, its U(0.8, 1.2) factor floored
// at minJitteredDelay.
func delay(initial, maxDelay time.Duration, mult float64, attempt int, jitter bool, rnd func() float64) time.Duration {
	d := backoff.Delay(initial, maxDelay, mult, attempt)
	if !jitter {
		return d
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return backoff.Jitter(d, rnd())
}
