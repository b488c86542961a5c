package watchtree

import (
	"time"

	"github.com/watchtree/watchtree/internal/policy"
)

// The stream policies are defined once, in internal/policy, and shared with the actors that apply
// them; these aliases are their only public names. The types' docs (fields, defaults, formulas)
// are on the internal/policy types; the zero value of every policy field means its default.

// RetryPolicy is the handler retries of Stream.Retry (internal/policy.Retry).
type RetryPolicy = policy.Retry

// RestartPolicy is the restarts of a crashed stream of Stream.Restart (internal/policy.Restart).
type RestartPolicy = policy.Restart

// CheckpointPolicy is when the resume position is persisted (internal/policy.Checkpoint).
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
	c := policy.NewErrors("")
	p.validateInto(c, "DeadLetterPolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>.
func (p DeadLetterPolicy) validateInto(c *policy.Errors, field string) {
	if p.Collection != "" {
		if rule := collectionNameRule(p.Collection); rule != "" {
			c.Add(field+".Collection", "%s, got %q", rule, p.Collection)
		}
	}
	if p.Retention < 0 {
		c.Add(field+".Retention", "must be > 0 (0 means the default %v), got %v", defaultDeadLetterTTL, p.Retention)
	}
}
