package watchtree

import (
	"math"
	"math/rand/v2"
	"time"

	bo "github.com/watchtree/watchtree/internal/backoff"
)

// Policy defaults; the zero value of every policy field means the default listed here.
const (
	defaultRetryMaxAttempts   = 3
	defaultRetryInitialDelay  = 500 * time.Millisecond
	defaultRetryMaxDelay      = 30 * time.Second
	defaultRetryMultiplier    = 2.0
	defaultRestartInitial     = time.Second
	defaultRestartMaxDelay    = 60 * time.Second
	defaultRestartMultiplier  = 2.0
	defaultSaveEvery          = 100
	defaultSaveInterval       = time.Second
	defaultIdleInterval       = 5 * time.Minute
	defaultMaxUnflushedFactor = 100
	defaultDeadLetterColl     = "_wt_dead_letters"
	defaultDeadLetterTTL      = 14 * 24 * time.Hour
)

// RetryPolicy decides how often a failing handler is called again for the same event, and how
// long the event's lane waits between calls. Retrying blocks only the event's lane; other lanes go
// on. The zero value is the default policy: 3 attempts, 500ms, 1s, jitter on.
//
// After the n-th failed attempt (n = 1, 2, ...) the lane waits
//
//	delay(n) = min(InitialDelay × Multiplier^(n-1), MaxDelay) × U(0.8, 1.2)
//
// where the jitter factor U(0.8, 1.2) is uniform and applies unless DisableJitter is set; a
// jittered delay is floored at 1ms. Without jitter the defaults give 500ms, 1s, 2s, 4s, 8s, 16s
// and then 30s.
//
// An error marked with Permanent, a *DecodeError, or any error with a `Permanent() bool` method
// returning true skips the remaining attempts. An error made by Skip settles the event without a
// dead letter. When the attempts run out, the event is dead-lettered (see DeadLetterPolicy).
type RetryPolicy struct {
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
	// >= 1; 0 means the default.
	Multiplier float64
	// DisableJitter turns the ±20% jitter off. Jitter is on by default so that many lanes or
	// instances failing together do not retry in lockstep.
	DisableJitter bool
}

// withDefaults returns p with every zero field replaced by its default.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = defaultRetryMaxAttempts
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = defaultRetryInitialDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = defaultRetryMaxDelay
	}
	if p.Multiplier == 0 {
		p.Multiplier = defaultRetryMultiplier
	}
	return p
}

// Validate checks p. The error names the field and the rule; it is a *ConfigError (several are
// joined with errors.Join) and matches ErrInvalidConfig.
func (p RetryPolicy) Validate() error {
	c := &configErrors{prefix: "RetryPolicy."}
	p.validate(c)
	return c.err()
}

func (p RetryPolicy) validate(c *configErrors) {
	if p.MaxAttempts < 0 {
		c.add("MaxAttempts", "must be >= 1 (0 means the default %d), got %d", defaultRetryMaxAttempts, p.MaxAttempts)
	}
	validateBackoff(c, p.InitialDelay, p.MaxDelay, p.Multiplier, defaultRetryInitialDelay, defaultRetryMaxDelay)
}

// Delay returns the delay after the attempt-th failed attempt (1-based), following the formula
// on RetryPolicy with zero fields replaced by their defaults. rnd returns a uniform float in
// [0, 1) and is used only for jitter; nil means math/rand/v2.Float64. An attempt below 1 counts
// as 1. Delay never overflows: a huge exponent gives MaxDelay.
func (p RetryPolicy) Delay(attempt int, rnd func() float64) time.Duration {
	p = p.withDefaults()
	return backoff(p.InitialDelay, p.MaxDelay, p.Multiplier, attempt, !p.DisableJitter, rnd)
}

// RestartPolicy decides when a crashed stream is started again by its supervisor. It counts
// deaths of the stream (cursor errors after the driver's own resume, stepdowns that surface as
// errors, failed starts), not handler failures. The zero value is the default policy: unlimited
// attempts, 1s, 2s, 4s, ... capped at 60s, no jitter.
//
// Before the attempt-th restart (attempt = 1, 2, ...) the supervisor waits
//
//	delay(attempt) = min(InitialDelay × Multiplier^(attempt-1), MaxDelay)
//
// multiplied by a uniform U(0.8, 1.2) and floored at 1ms when Jitter is set. The default cadence
// is 1s, 2s, 4s, 8s, 16s, 32s, then 60s; MaxAttempts 30 is about 25 minutes.
//
// Every death consumes one attempt, including a death right after a restart. The counter resets
// to zero on the first successful resubscription (the cursor is open again). When MaxAttempts is
// set and exhausted, the give-up is immediate (no further delay) and terminal: the stream is
// reported Stopped{Crashed} with ErrGaveUp, its lease is released, and it stays down until an
// operator starts it. An operator start during the backoff wins over the pending attempt.
type RestartPolicy struct {
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
	// >= 1; 0 means the default.
	Multiplier float64
	// Jitter multiplies every delay by U(0.8, 1.2) (±20%), floored at 1ms. Default false.
	Jitter bool
}

func (p RestartPolicy) withDefaults() RestartPolicy {
	if p.InitialDelay == 0 {
		p.InitialDelay = defaultRestartInitial
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = defaultRestartMaxDelay
	}
	if p.Multiplier == 0 {
		p.Multiplier = defaultRestartMultiplier
	}
	return p
}

// Validate checks p. The error names the field and the rule; it is a *ConfigError (several are
// joined with errors.Join) and matches ErrInvalidConfig.
func (p RestartPolicy) Validate() error {
	c := &configErrors{prefix: "RestartPolicy."}
	p.validate(c)
	return c.err()
}

func (p RestartPolicy) validate(c *configErrors) {
	if p.MaxAttempts < 0 {
		c.add("MaxAttempts", "must be >= 0 (0 means unlimited), got %d", p.MaxAttempts)
	}
	validateBackoff(c, p.InitialDelay, p.MaxDelay, p.Multiplier, defaultRestartInitial, defaultRestartMaxDelay)
}

// Delay returns the delay before the attempt-th restart (1-based), following the formula on
// RestartPolicy with zero fields replaced by their defaults. rnd returns a uniform float in
// [0, 1) and is used only when Jitter is set; nil means math/rand/v2.Float64. An attempt below 1
// counts as 1.
func (p RestartPolicy) Delay(attempt int, rnd func() float64) time.Duration {
	p = p.withDefaults()
	return backoff(p.InitialDelay, p.MaxDelay, p.Multiplier, attempt, p.Jitter, rnd)
}

// validateBackoff checks the delay and multiplier fields shared by RetryPolicy and RestartPolicy.
// The cross-field rule MaxDelay >= InitialDelay is checked on defaulted values, and only when
// both delays are themselves valid.
func validateBackoff(c *configErrors, initial, maxDelay time.Duration, mult float64, defInitial, defMax time.Duration) {
	ok := true
	if initial < 0 {
		c.add("InitialDelay", "must be > 0 (0 means the default %v), got %v", defInitial, initial)
		ok = false
	}
	if maxDelay < 0 {
		c.add("MaxDelay", "must be > 0 (0 means the default %v), got %v", defMax, maxDelay)
		ok = false
	}
	if math.IsNaN(mult) || math.IsInf(mult, 0) || (mult != 0 && mult < 1) {
		c.add("Multiplier", "must be finite and >= 1, got %v", mult)
	}
	if !ok {
		return
	}
	i, m := initial, maxDelay
	if i == 0 {
		i = defInitial
	}
	if m == 0 {
		m = defMax
	}
	if m < i {
		suffix := ""
		if maxDelay == 0 {
			suffix = " (the default)"
		}
		c.add("MaxDelay", "must be >= InitialDelay (%v), got %v%s", i, m, suffix)
	}
}

// backoff computes min(initial × mult^(attempt-1), maxDelay), then the optional jitter factor
// U(0.8, 1.2) floored at 1ms. It works in float64 so that large exponents saturate at maxDelay
// instead of overflowing.
func backoff(initial, maxDelay time.Duration, mult float64, attempt int, jitter bool, rnd func() float64) time.Duration {
	d := bo.Delay(initial, maxDelay, mult, attempt)
	if !jitter {
		return d
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return bo.Jitter(d, rnd())
}

// CheckpointPolicy decides when the stream's resume position is persisted. The position written
// is the low-water mark: the resume token of the highest event such that it and every earlier
// event have settled (handled, filtered, unhandled, skipped or durably dead-lettered). A token is
// never written for an event that is in flight or being retried.
//
// A write happens when SaveEvery settlements have accumulated since the last successful write,
// when the oldest unwritten settlement is SaveInterval old, and on a graceful stop. When nothing
// is in flight and the server's post-batch resume token moved, that token is written at most once
// per IdleInterval, so an idle stream never ages out of the oplog.
//
// The bound of unflushed progress, which is also the bound of replays after a crash:
//   - at any time, at most MaxUnflushed settled events are not covered by a successful write:
//     the stream takes new events only while the unwritten settlements plus the events in
//     flight (handled or waiting in the dispatcher, or granted to the cursor as credit) stay
//     within MaxUnflushed, so the events in flight cannot settle past it. A MaxUnflushed below
//     the dispatcher's capacity (1,024 events) therefore also caps the events in flight, and
//     the stream goes at the pace of the writes, each successful one making room again. Events
//     that settle while an earlier one is still in flight (e.g. retrying) stop counting once
//     the position up to that one is written: no position can cover them before it settles,
//     and they replay after a crash like it;
//   - with a healthy store, fewer than SaveEvery settled events, all settled within the last
//     SaveInterval (plus the one write in flight), are replayed after a crash, together with the
//     events that were in flight and not settled;
//   - with a failing store, a failed write stays due and is retried on every SaveInterval tick
//     and reported (Observer CheckpointFailed); processing goes on until MaxUnflushed settled
//     events are unwritten, then the stream waits (no new credit) until a write succeeds.
//     So at most MaxUnflushed settled events replay, whatever the outage length.
type CheckpointPolicy struct {
	// SaveEvery is the number of settlements that triggers a write. Default 100. Must be >= 0;
	// 0 means the default.
	SaveEvery int
	// SaveInterval is the maximum age of unwritten progress. Default 1s. Must be >= 0; 0 means
	// the default.
	SaveInterval time.Duration
	// IdleInterval is the idle-token period: how long a moved post-batch resume token waits
	// before it is written when no event settled since the last write. Default 5 minutes (oplog
	// windows are hours). It is much longer than SaveInterval on purpose: every checkpoint write
	// is itself an oplog entry that moves every other idle stream's token, so a short period
	// makes idle streams keep writing each other's checkpoints. Must be >= 0; 0 means the
	// default.
	IdleInterval time.Duration
	// MaxUnflushed is the most settled events that may be unwritten (not covered by a
	// successful checkpoint write) at any time, the events in flight counted against it; the
	// stream waits for a successful write when it is reached, as when the checkpoint store
	// fails. Default 100 × SaveEvery (10,000 with the default SaveEvery). Must be >= 0 (0 means
	// the default) and >= SaveEvery.
	MaxUnflushed int
}

func (p CheckpointPolicy) withDefaults() CheckpointPolicy {
	if p.SaveEvery == 0 {
		p.SaveEvery = defaultSaveEvery
	}
	if p.SaveInterval == 0 {
		p.SaveInterval = defaultSaveInterval
	}
	if p.IdleInterval == 0 {
		p.IdleInterval = defaultIdleInterval
	}
	if p.MaxUnflushed == 0 {
		if p.SaveEvery > math.MaxInt/defaultMaxUnflushedFactor {
			p.MaxUnflushed = math.MaxInt
		} else {
			p.MaxUnflushed = p.SaveEvery * defaultMaxUnflushedFactor
		}
	}
	return p
}

// Validate checks p. The error names the field and the rule; it is a *ConfigError (several are
// joined with errors.Join) and matches ErrInvalidConfig.
func (p CheckpointPolicy) Validate() error {
	c := &configErrors{prefix: "CheckpointPolicy."}
	p.validate(c)
	return c.err()
}

func (p CheckpointPolicy) validate(c *configErrors) {
	ok := true
	if p.SaveEvery < 0 {
		c.add("SaveEvery", "must be >= 1 (0 means the default %d), got %d", defaultSaveEvery, p.SaveEvery)
		ok = false
	}
	if p.SaveInterval < 0 {
		c.add("SaveInterval", "must be > 0 (0 means the default %v), got %v", defaultSaveInterval, p.SaveInterval)
	}
	if p.IdleInterval < 0 {
		c.add("IdleInterval", "must be > 0 (0 means the default %v), got %v", defaultIdleInterval, p.IdleInterval)
	}
	if p.MaxUnflushed < 0 {
		c.add("MaxUnflushed", "must be >= SaveEvery (0 means the default %d × SaveEvery), got %d", defaultMaxUnflushedFactor, p.MaxUnflushed)
		ok = false
	}
	if ok {
		d := p.withDefaults()
		if d.MaxUnflushed < d.SaveEvery {
			c.add("MaxUnflushed", "must be >= SaveEvery (%d), got %d", d.SaveEvery, d.MaxUnflushed)
		}
	}
}

// DeadLetterPolicy decides where an event goes when its attempts run out or its error is
// permanent. The zero value is the default: on, collection "_wt_dead_letters" in the store
// database, records kept 14 days (TTL index on expiresAt).
//
// A record holds the stream, resume token, operation type, document key, raw event, error,
// stack (for panics), attempts and timestamps. The event settles only once the record is durably
// written; while the write fails, the event stays unsettled, the write is retried with backoff
// and reported (Observer DeadLetterFailed), and the checkpoint does not pass it. Nothing is
// skipped.
type DeadLetterPolicy struct {
	// Disabled turns dead letters off. An event whose attempts run out is then settled without a
	// record: it is logged at ERROR with the full error and reported to the Observer as
	// DeadLettered{Dropped: true}. Use it only when losing such events is acceptable.
	Disabled bool
	// Collection is the dead-letter collection in the store database. Default "_wt_dead_letters".
	Collection string
	// Retention is how long a record is kept before the TTL index removes it. Default 14 days.
	// Must be >= 0; 0 means the default.
	Retention time.Duration
}

func (p DeadLetterPolicy) withDefaults() DeadLetterPolicy {
	if p.Collection == "" {
		p.Collection = defaultDeadLetterColl
	}
	if p.Retention == 0 {
		p.Retention = defaultDeadLetterTTL
	}
	return p
}

// Validate checks p. The error names the field and the rule; it is a *ConfigError (several are
// joined with errors.Join) and matches ErrInvalidConfig.
func (p DeadLetterPolicy) Validate() error {
	c := &configErrors{prefix: "DeadLetterPolicy."}
	p.validate(c)
	return c.err()
}

func (p DeadLetterPolicy) validate(c *configErrors) {
	if p.Collection != "" {
		if rule := collectionNameRule(p.Collection); rule != "" {
			c.add("Collection", "%s, got %q", rule, p.Collection)
		}
	}
	if p.Retention < 0 {
		c.add("Retention", "must be > 0 (0 means the default %v), got %v", defaultDeadLetterTTL, p.Retention)
	}
}
