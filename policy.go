package watchtree

import (
	"github.com/watchtree/watchtree/internal/configcheck"
	"time"

	"github.com/watchtree/watchtree/policy"
)

// RetryPolicy, RestartPolicy and CheckpointPolicy are package policy's types, the very ones the
// actors take, declared and documented there once. DeadLetterPolicy is the root's own: only the
// engine applies it.

// RetryPolicy (Stream.Retry) decides how often a failing handler is called again for the same
// event, and how long the event's lane waits between calls. The zero value is the default
// policy: 3 attempts, waiting 500ms then 1s, jitter on. It is package policy's Retry, where its
// fields (units, defaults, bounds), the delay formula and Validate are documented; the
// dispatcher actor takes the same type.
//
// Its fields, each documented on policy.Retry:
//   - MaxAttempts int: the handler calls per event, the first included (default 3; 1: no retry)
//   - InitialDelay time.Duration: the wait after the first failed call (default 500ms)
//   - MaxDelay time.Duration: the cap of a wait, before jitter (default 30s)
//   - Multiplier float64: the growth between consecutive waits, >= 1 (default 2.0)
//   - DisableJitter bool: turns the ±20% jitter off (default false: jitter on)
type RetryPolicy = policy.Retry

// RestartPolicy (Stream.Restart) decides when a crashed stream is started again by its
// supervisor actor. The zero value is the default policy: unlimited attempts, 1s, 2s, 4s, ...
// capped at 60s, no jitter. It is package policy's Restart, where its fields (units, defaults,
// bounds), the delay formula, what counts as a death and Validate are documented; the
// supervisor actor takes the same type.
//
// Its fields, each documented on policy.Restart:
//   - MaxAttempts int: consecutive restarts before giving up (default 0: unlimited)
//   - InitialDelay time.Duration: the wait before the first restart (default 1s)
//   - MaxDelay time.Duration: the cap of a wait, before jitter (default 60s)
//   - Multiplier float64: the growth between consecutive waits, >= 1 (default 2.0)
//   - Jitter bool: multiplies every wait by U(0.8, 1.2) (default false)
type RestartPolicy = policy.Restart

// CheckpointPolicy (Stream.Checkpoint) decides when the stream's resume position is persisted.
// The zero value is the default policy: a write every 1,000 settlements or 1s, an idle token
// every 5 minutes. It is package policy's Checkpoint, where its fields (units, defaults,
// bounds), when a write happens, the bound of unflushed progress and Validate are documented;
// the checkpointer actor takes the same type.
//
// Its fields, each documented on policy.Checkpoint:
//   - SaveEvery int: the settlements that trigger a write (default 1,000)
//   - SaveInterval time.Duration: the longest unwritten progress waits (default 1s)
//   - IdleInterval time.Duration: how often a moved idle token is written (default 5m)
//   - MaxUnflushed int: the most settled events not yet written; the stream waits there
//     (default the larger of 10,000 and 10 × SaveEvery)
//   - Retention time.Duration: how long an instance's own checkpoint outlives its last write
//     (default 30 days)
//   - Ephemeral bool: no checkpoint is loaded or written, for state rebuilt at every start
//     (default false)
type CheckpointPolicy = policy.Checkpoint

// Defaults of DeadLetterPolicy.
const (
	defaultDeadLetterColl = "_wt_dead_letters"
	defaultDeadLetterTTL  = 14 * 24 * time.Hour
)

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
	// DeadLettered{Dropped: true}. Use it only when losing such events is acceptable. Default
	// false: dead letters are on.
	Disabled bool
	// Collection is the dead-letter collection in the store database. Default "_wt_dead_letters".
	// It names a collection of the default MongoDB store, so Spawn refuses it when
	// Config.DeadLetters is set.
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
	c := configcheck.NewErrors("")
	p.validateInto(c, "DeadLetterPolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>.
func (p DeadLetterPolicy) validateInto(c *configcheck.Errors, field string) {
	if p.Collection != "" {
		if rule := collectionNameRule(p.Collection); rule != "" {
			c.Add(field+".Collection", "%s, got %q", rule, p.Collection)
		}
	}
	if p.Retention < 0 {
		c.Add(field+".Retention", "must be > 0 (0 means the default %v), got %v", defaultDeadLetterTTL, p.Retention)
	}
}
