package watchtree

import (
	"time"

	"github.com/watchtree/watchtree/internal/policy"
)

// The stream policies are defined once, in package policy, and shared with the actors that apply
// them; these aliases give them their public names. The zero value of every policy field means
// its default.

// RetryPolicy decides how often a failing handler is called again for the same event, and how
// long the event's lane waits between calls. It is policy.Retry: see there for the fields, their
// defaults (3 attempts, 500ms, 1s, ... capped at 30s, ±20% jitter) and the delay formula.
type RetryPolicy = policy.Retry

// RestartPolicy decides when a crashed stream is started again by its supervisor. It is
// policy.Restart: see there for the fields, their defaults (unlimited attempts, 1s, 2s, ...
// capped at 60s, no jitter) and the delay formula.
type RestartPolicy = policy.Restart

// CheckpointPolicy decides when the stream's resume position is persisted. It is
// policy.Checkpoint: see there for the fields, their defaults (every 1,000 settlements or 1s, an
// idle stream's token every 5 minutes, an instance's checkpoint kept 30 days after its last
// write), the bound of replays after a crash, and Ephemeral streams, which write none.
type CheckpointPolicy = policy.Checkpoint

// DefaultCheckpointRetention is the default CheckpointPolicy.Retention: an AllInstances
// instance's checkpoint not written for 30 days expires.
const DefaultCheckpointRetention = policy.DefaultRetention

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
