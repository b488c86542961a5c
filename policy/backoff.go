package policy

import (
	"cmp"
	"github.com/watchtree/watchtree/internal/configcheck"
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

// Retry (watchtree.RetryPolicy, Stream.Retry; dispatcher.Config.Retry) decides how often a failing
// handler is called again for the same event, and how long the event's lane waits between calls;
// the dispatcher actor applies it. Retrying blocks only the event's lane; other lanes go on. The
// zero value is the default policy: 3 attempts, waiting 500ms then 1s, jitter on.
//
// After the n-th failed attempt (n = 1, 2, ...) the lane waits
//
//	delay(n) = min(InitialDelay × Multiplier^(n-1), MaxDelay) × U(0.8, 1.2)
//
// where the jitter factor U(0.8, 1.2) is uniform and applies unless DisableJitter is set; a
// jittered delay is floored at 1ms (so it may exceed MaxDelay by up to 20%). Without jitter the
// defaults give 500ms, 1s, 2s, 4s, 8s, 16s and then 30s. The same formula spaces the retries of
// a failing dead-letter write (n = the n-th failed write; those retries never stop).
//
// An error marked with watchtree.Permanent, a *watchtree.DecodeError, or any error with a
// `Permanent() bool` method returning true skips the remaining attempts. An error made by
// watchtree.Skip settles the event without a dead letter. When the attempts run out, the event is
// dead-lettered (see watchtree.DeadLetterPolicy).
type Retry struct {
	// MaxAttempts is the number of handler calls per event, including the first. Default 3.
	// 1 means no retry. Must be >= 0; 0 means the default.
	MaxAttempts int
	// InitialDelay is the delay after the first failed attempt. Default 500ms. Must be >= 0;
	// 0 means the default.
	InitialDelay time.Duration
	// MaxDelay caps the delay before jitter. Default 30s. Must be >= 0 (0 means the default)
	// and, once defaulted, >= InitialDelay.
	MaxDelay time.Duration
	// Multiplier is the growth factor between consecutive delays. Default 2.0. Must be finite and
	// >= 1 (1 gives a constant delay); 0 means the default.
	Multiplier float64
	// DisableJitter turns the ±20% jitter off. Jitter is on by default so that many lanes or
	// instances failing together do not retry in lockstep.
	DisableJitter bool
}

// withDefaults returns p with every zero field replaced by its default.
func (p Retry) withDefaults() Retry {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, defaultRetryMaxAttempts)
	retryCurve.fill(&p.InitialDelay, &p.MaxDelay, &p.Multiplier)
	return p
}

// Validate checks p. The error names the field and the rule ("RetryPolicy.Multiplier must be
// finite and >= 1, got 0.5"); it is a *configerr.Error (several are joined with errors.Join) and
// matches configerr.ErrInvalid.
func (p Retry) Validate() error {
	return validate(p, "RetryPolicy")
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>, e.g.
// "Retry.MaxAttempts" for field "Retry".
func (p Retry) validateInto(c *configcheck.Errors, field string) {
	if p.MaxAttempts < 0 {
		c.Add(field+".MaxAttempts", "must be >= 1 (0 means the default %d), got %d", defaultRetryMaxAttempts, p.MaxAttempts)
	}
	retryCurve.validate(c, field, p.InitialDelay, p.MaxDelay, p.Multiplier)
}

// nthDelay is delayOf of a Retry: the delay after the attempt-th failed attempt, jittered unless
// DisableJitter is set.
func (p Retry) nthDelay(attempt int, rnd func() float64) time.Duration {
	p = p.withDefaults()
	return delay(p.InitialDelay, p.MaxDelay, p.Multiplier, attempt, !p.DisableJitter, rnd)
}

// Restart (watchtree.RestartPolicy, Stream.Restart; supervisor.Config.Policy) decides when a
// crashed stream is started again by its supervisor actor. It counts deaths of the stream (cursor
// errors after the driver's own resume, stepdowns that surface as errors, failed starts), not
// handler failures. The zero value is the default policy: unlimited attempts, 1s, 2s, 4s, ...
// capped at 60s, no jitter.
//
// Before the attempt-th restart (attempt = 1, 2, ...) the supervisor waits
//
//	delay(attempt) = min(InitialDelay × Multiplier^(attempt-1), MaxDelay)
//
// multiplied by a uniform U(0.8, 1.2) and floored at 1ms when Jitter is set (so a jittered delay
// may exceed MaxDelay by up to 20%). The default cadence is 1s, 2s, 4s, 8s, 16s, 32s, then 60s;
// MaxAttempts 30 is about 25 minutes.
//
// Every death consumes one attempt, including a death right after a restart. The counter resets
// to zero on the first successful resubscription (the cursor is open again). When MaxAttempts is
// set and exhausted, the give-up is immediate (no further delay) and terminal: the stream is
// reported Stopped{Crashed} with watchtree.ErrGaveUp, its lease is released, and it stays down
// until an operator starts it. An operator start during the backoff wins over the pending
// attempt.
type Restart struct {
	// MaxAttempts is the number of consecutive restarts before giving up. Default 0, which means
	// unlimited. Must be >= 0.
	MaxAttempts int
	// InitialDelay is the delay before the first restart. Default 1s. Must be >= 0; 0 means the
	// default.
	InitialDelay time.Duration
	// MaxDelay caps the delay before jitter. Default 60s. Must be >= 0 (0 means the default)
	// and, once defaulted, >= InitialDelay.
	MaxDelay time.Duration
	// Multiplier is the growth factor between consecutive delays. Default 2.0. Must be finite and
	// >= 1 (1 gives a constant delay); 0 means the default.
	Multiplier float64
	// Jitter multiplies every delay by U(0.8, 1.2) (±20%), floored at 1ms, so streams that died
	// together do not restart in lockstep. Default false.
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
	return validate(p, "RestartPolicy")
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>, e.g.
// "Restart.Multiplier" for field "Restart".
func (p Restart) validateInto(c *configcheck.Errors, field string) {
	if p.MaxAttempts < 0 {
		c.Add(field+".MaxAttempts", "must be >= 0 (0 means unlimited), got %d", p.MaxAttempts)
	}
	restartCurve.validate(c, field, p.InitialDelay, p.MaxDelay, p.Multiplier)
}

// nthDelay is delayOf of a Restart: the delay before the attempt-th restart, jittered only when
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
func (d curve) validate(c *configcheck.Errors, field string, initial, maxDelay time.Duration, mult float64) {
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
