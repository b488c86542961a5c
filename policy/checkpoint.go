package policy

import (
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

// Checkpoint is the checkpointer's form of watchtree.CheckpointPolicy
// (checkpointer.Config.Checkpoint): the same fields, converted with Checkpoint(p).
// watchtree.CheckpointPolicy documents when a write happens and the bound of unflushed progress.
type Checkpoint struct {
	// SaveEvery is the number of settlements that triggers a write. Default 1,000. Must be >= 0;
	// 0 means the default.
	SaveEvery int
	// SaveInterval is the maximum age of unwritten progress after events settled. Default 1s.
	// Must be >= 0; 0 means the default.
	SaveInterval time.Duration
	// IdleInterval is how long a moved post-batch resume token waits before it is written when
	// no event settled since the last write. Default 5 minutes. Must be >= 0; 0 means the
	// default.
	IdleInterval time.Duration
	// MaxUnflushed is the most settled events that may be unwritten at any time, the events in
	// flight counted against it. Default the larger of 10,000 and 10 × SaveEvery. Must be >= 0
	// (0 means the default) and >= SaveEvery.
	MaxUnflushed int
	// Retention is how long an instance's own checkpoint (Mode AllInstances) is kept after its
	// last write. Default 30 days. Must be >= 0 (0 means the default) and, when set,
	// >= 2 × IdleInterval.
	Retention time.Duration
	// Ephemeral: no checkpoint is ever loaded or written; a new tree starts at the current
	// position, a restart within the tree resumes from the position kept in memory. Requires
	// the other fields 0. Default false.
	Ephemeral bool
}

// withDefaults returns p with every zero field replaced by its default.
func (p Checkpoint) withDefaults() Checkpoint {
	if p.SaveEvery == 0 {
		p.SaveEvery = defaultSaveEvery
	}
	if p.SaveInterval == 0 {
		p.SaveInterval = defaultSaveInterval
	}
	if p.IdleInterval == 0 {
		p.IdleInterval = defaultIdleInterval
	}
	if p.Retention == 0 {
		p.Retention = defaultRetention
	}
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
	c := NewErrors("")
	p.validateInto(c, "CheckpointPolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>, e.g.
// "Checkpoint.SaveEvery" for field "Checkpoint".
func (p Checkpoint) validateInto(c *Errors, field string) {
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

// ValidateStartInto adds to c the rule that ties p to the stream's start position: an Ephemeral
// stream starts at the current position on every start, so start (field startField) must be
// Resume or Latest; an At position would be applied again at every start, long after t.
func ValidateStartInto(c *Errors, startField string, p Checkpoint, start StartPosition) {
	if p.Ephemeral && start.kind == StartAt {
		c.Add(startField, "must be Resume or Latest when Checkpoint.Ephemeral is set (an ephemeral stream starts at the current position on every start), got %v", start)
	}
}
