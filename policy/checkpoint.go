package policy

import (
	"cmp"
	"github.com/watchtree/watchtree/internal/configcheck"
	"math"
	"time"
)

// Defaults of Checkpoint: the zero value of a field means the default below.
const (
	// defaultSaveEvery is the default Checkpoint.SaveEvery (settlements per write). At 1,000,
	// a stream catching up at 100,000 events/s writes 100 times a second, not 1,000 (each write
	// is a round trip and an oplog entry); below 1,000 events/s SaveInterval decides.
	defaultSaveEvery = 1000
	// defaultSaveInterval is the default Checkpoint.SaveInterval.
	defaultSaveInterval = time.Second
	// defaultIdleInterval is the default Checkpoint.IdleInterval.
	defaultIdleInterval = 5 * time.Minute
	// defaultMaxUnflushed and defaultMaxUnflushedFactor give the default
	// Checkpoint.MaxUnflushed: the larger of defaultMaxUnflushed and
	// defaultMaxUnflushedFactor × SaveEvery.
	defaultMaxUnflushed       = 10_000
	defaultMaxUnflushedFactor = 10
	// defaultRetention is the default Checkpoint.Retention (30 days).
	defaultRetention = 30 * 24 * time.Hour
	// minRetentionFactor gives the shortest Checkpoint.Retention accepted:
	// minRetentionFactor × IdleInterval.
	minRetentionFactor = 2
)

// Checkpoint (watchtree.CheckpointPolicy, Stream.Checkpoint; checkpointer.Config.Checkpoint)
// decides when the stream's resume position is persisted; the checkpointer actor applies it. The
// position written is the low-water mark: the resume token of the highest event such that it and
// every earlier event have settled (handled, filtered, unhandled, skipped or durably
// dead-lettered). A token is never written for an event that is in flight or being retried. A
// position equal to the stored one is never written again.
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
type Checkpoint struct {
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

// withDefaults returns p with every zero field replaced by its default.
func (p Checkpoint) withDefaults() Checkpoint {
	p.SaveEvery = cmp.Or(p.SaveEvery, defaultSaveEvery)
	p.SaveInterval = cmp.Or(p.SaveInterval, defaultSaveInterval)
	p.IdleInterval = cmp.Or(p.IdleInterval, defaultIdleInterval)
	p.Retention = cmp.Or(p.Retention, defaultRetention)
	if p.MaxUnflushed == 0 {
		if p.SaveEvery > math.MaxInt/defaultMaxUnflushedFactor {
			p.MaxUnflushed = math.MaxInt
		} else {
			p.MaxUnflushed = max(defaultMaxUnflushed, p.SaveEvery*defaultMaxUnflushedFactor)
		}
	}
	return p
}

// Validate checks p. The error names the field and the rule ("CheckpointPolicy.SaveEvery must be
// >= 1 ..."); it is a *configerr.Error (several are joined with errors.Join) and matches
// configerr.ErrInvalid.
func (p Checkpoint) Validate() error {
	return validate(p, "CheckpointPolicy")
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>, e.g.
// "Checkpoint.SaveEvery" for field "Checkpoint".
func (p Checkpoint) validateInto(c *configcheck.Errors, field string) {
	ok := true
	if p.SaveEvery < 0 {
		c.Add(field+".SaveEvery", "must be >= 1 (0 means the default %d), got %d", defaultSaveEvery, p.SaveEvery)
		ok = false
	}
	if p.SaveInterval < 0 {
		c.Add(field+".SaveInterval", "must be > 0 (0 means the default %v), got %v", defaultSaveInterval, p.SaveInterval)
	}
	if p.IdleInterval < 0 {
		c.Add(field+".IdleInterval", "must be > 0 (0 means the default %v), got %v", defaultIdleInterval, p.IdleInterval)
	}
	if p.MaxUnflushed < 0 {
		c.Add(field+".MaxUnflushed", "must be >= SaveEvery (0 means the default, the larger of %d and %d × SaveEvery), got %d", defaultMaxUnflushed, defaultMaxUnflushedFactor, p.MaxUnflushed)
		ok = false
	}
	if p.Retention < 0 {
		c.Add(field+".Retention", "must be >= %d × IdleInterval (0 means the default %v), got %v", minRetentionFactor, defaultRetention, p.Retention)
		ok = false
	}
	if ok {
		d := p.withDefaults()
		if d.MaxUnflushed < d.SaveEvery {
			c.Add(field+".MaxUnflushed", "must be >= SaveEvery (%d), got %d", d.SaveEvery, d.MaxUnflushed)
		}
		if p.Retention > 0 && d.IdleInterval > 0 && p.Retention/minRetentionFactor < d.IdleInterval {
			c.Add(field+".Retention", "must be >= %d × IdleInterval (%v), so that a running idle instance's checkpoint never expires, got %v",
				minRetentionFactor, d.IdleInterval, p.Retention)
		}
	}
	if p.Ephemeral {
		for _, f := range []struct {
			name string
			set  bool
			val  any
		}{
			{"SaveEvery", p.SaveEvery != 0, p.SaveEvery},
			{"SaveInterval", p.SaveInterval != 0, p.SaveInterval},
			{"IdleInterval", p.IdleInterval != 0, p.IdleInterval},
			{"MaxUnflushed", p.MaxUnflushed != 0, p.MaxUnflushed},
			{"Retention", p.Retention != 0, p.Retention},
		} {
			if f.set {
				c.Add(field+"."+f.name, "must be 0 when Ephemeral is set (an ephemeral stream writes no checkpoint), got %v", f.val)
			}
		}
	}
}

// validateStartInto adds to c the rule that ties p to the stream's start position: an Ephemeral
// stream starts at the current position on every start, so start (field startField) must be
// Resume or Latest; an At position would be applied again at every start, long after t.
func validateStartInto(c *configcheck.Errors, startField string, p Checkpoint, start StartPosition) {
	if p.Ephemeral && start.kind == startAt {
		c.Add(startField, "must be Resume or Latest when Checkpoint.Ephemeral is set (an ephemeral stream starts at the current position on every start), got %v", start)
	}
}
