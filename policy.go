package watchtree

import (
	"time"

	"github.com/watchtree/watchtree/policy"
)

// The stream policies are declared here, with their fields' docs; package policy declares the
// same field lists for the actors that apply them, with the defaults, validators and the delay
// formula. The root converts with a struct conversion (policy.Retry(p)) where a Stream or a
// Config is validated and compiled, so a field added on one side only does not compile.

// RetryPolicy (Stream.Retry) decides how often a failing handler is called again for the same
// event, and how long the event's lane waits between calls; the dispatcher actor applies it.
// Retrying blocks only the event's lane; other lanes go on. The zero value is the default
// policy: 3 attempts, waiting 500ms then 1s, jitter on.
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
// An error marked with Permanent, a *DecodeError, or any error with a
// `Permanent() bool` method returning true skips the remaining attempts. An error made by
// Skip settles the event without a dead letter. When the attempts run out, the event is
// dead-lettered (see DeadLetterPolicy).
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
	// >= 1 (1 gives a constant delay); 0 means the default.
	Multiplier float64
	// DisableJitter turns the ±20% jitter off. Jitter is on by default so that many lanes or
	// instances failing together do not retry in lockstep.
	DisableJitter bool
}

// Validate checks p. The error names the field and the rule ("RetryPolicy.Multiplier must be
// finite and >= 1, got 0.5"); it is a *ConfigError (several are joined with errors.Join) and
// matches ErrInvalidConfig.
func (p RetryPolicy) Validate() error { return policy.Retry(p).Validate() }

// RestartPolicy (Stream.Restart) decides when a crashed stream is started again by its
// supervisor actor. It counts deaths of the stream (cursor errors after the driver's own resume,
// stepdowns that surface as errors, failed starts), not handler failures. The zero value is the
// default policy: unlimited attempts, 1s, 2s, 4s, ... capped at 60s, no jitter.
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
// reported Stopped{Crashed} with ErrGaveUp, its lease is released, and it stays down
// until an operator starts it. An operator start during the backoff wins over the pending
// attempt.
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
	// >= 1 (1 gives a constant delay); 0 means the default.
	Multiplier float64
	// Jitter multiplies every delay by U(0.8, 1.2) (±20%), floored at 1ms, so streams that died
	// together do not restart in lockstep. Default false.
	Jitter bool
}

// Validate checks p. The error names the field and the rule ("RestartPolicy.MaxAttempts must be
// >= 0 ..."); it is a *ConfigError (several are joined with errors.Join) and matches
// ErrInvalidConfig.
func (p RestartPolicy) Validate() error { return policy.Restart(p).Validate() }

// CheckpointPolicy (Stream.Checkpoint) decides when the stream's resume position is persisted;
// the checkpointer actor applies it. The position written is the low-water mark: the resume
// token of the highest event such that it and every earlier event have settled (handled,
// filtered, unhandled, skipped or durably dead-lettered). A token is never written for an event
// that is in flight or being retried. A position equal to the stored one is never written again.
//
// A write happens when SaveEvery settlements have accumulated since the last write, when the
// oldest unwritten settlement is SaveInterval old, and on a graceful stop. When nothing is in
// flight and the server's post-batch resume token moved, that token is written at most once per
// IdleInterval, so an idle stream never ages out of the oplog.
//
// The bound of unflushed progress, which is also the bound of replays after a crash:
//   - at any time, at most MaxUnflushed settled events are not covered by a successful write:
//     the stream takes new events only while the unwritten settlements plus the events in
//     flight (handled or waiting in the dispatcher, or granted to the cursor as credit) stay
//     within MaxUnflushed, so the events in flight cannot settle past it. A MaxUnflushed below
//     the dispatcher's capacity (4,096 events) therefore also caps the events in flight, and
//     the stream goes at the pace of the writes, each successful one making room again. Events
//     that settle while an earlier one is still in flight (e.g. retrying) stop counting once
//     the position up to that one is written: no position can cover them before it settles,
//     and they replay after a crash like it;
//   - with a healthy store, fewer than SaveEvery settled events, all settled within the last
//     SaveInterval (plus the one write in flight), are replayed after a crash, together with the
//     events that were in flight and not settled;
//   - with a failing store, a failed write stays due, is retried with backoff and reported
//     (Observer CheckpointFailed); processing goes on until MaxUnflushed settled events are
//     unwritten, then the stream waits (no new credit) until a write succeeds. So at most
//     MaxUnflushed settled events replay, whatever the outage length.
type CheckpointPolicy struct {
	// SaveEvery is the number of settlements that triggers a write. Default 1,000. Must be >= 0;
	// 0 means the default.
	SaveEvery int
	// SaveInterval is the maximum age of unwritten progress after events settled. Default 1s.
	// Must be >= 0; 0 means the default.
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
	// fails. Default the larger of 10,000 and 10 × SaveEvery (10,000 with the default
	// SaveEvery). Must be >= 0 (0 means the default) and >= SaveEvery.
	MaxUnflushed int

	// Retention is how long an instance's own checkpoint (Mode AllInstances) is kept after its
	// last write: every write sets its expiry to the write's time + Retention, and a checkpoint
	// not written for Retention is deleted (mongostore: by a TTL index on expiresAt, within
	// about a minute of its expiry; reads ignore it from then on). An instance that comes back
	// after that starts per StartPosition, as a new stream does. So the checkpoints of instances
	// that are gone (a pod of an old ReplicaSet, a renamed host) do not pile up. A running
	// instance writes at least every IdleInterval while the server's position moves (a replica
	// set's moves every few seconds even without writes), so its checkpoint never expires.
	// The shared position (SingleLeader) never expires. Default 30 days. Must be >= 0 (0 means
	// the default) and, when set, >= 2 × IdleInterval.
	Retention time.Duration

	// Ephemeral is for instances whose state lives in memory and is rebuilt at every start (a
	// local cache, in-memory indexes, WebSocket fan-out): no checkpoint is ever loaded or
	// written, so N instances do not pay N × checkpoint writes for a position nobody will
	// resume from. Every start of a new stream tree (Spawn, a restarted process) begins at the
	// current position, as StartPosition Latest does; a restart of the cursor within the tree
	// (a crash, an operator Restart, Stop then Start) resumes from the position kept in memory,
	// so the process misses nothing while it lives. Preload the state from the collection
	// itself at start; OnHistoryLost still applies (a gap record is still written) when the
	// in-memory position has left the oplog. Requires Mode AllInstances and StartPosition
	// Resume or Latest (both mean the current position); SaveEvery, SaveInterval,
	// IdleInterval, MaxUnflushed and Retention must be left 0, since nothing is written.
	// Default false.
	Ephemeral bool
}

// Validate checks p. The error names the field and the rule ("CheckpointPolicy.SaveEvery must be
// >= 1 ..."); it is a *ConfigError (several are joined with errors.Join) and matches
// ErrInvalidConfig.
func (p CheckpointPolicy) Validate() error { return policy.Checkpoint(p).Validate() }

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
