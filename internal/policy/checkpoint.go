package policy

import (
	"math"
	"time"
)

// Defaults of Checkpoint: the zero value of a field means the default below.
const (
	// DefaultSaveEvery is the default Checkpoint.SaveEvery (settlements per write). At 1,000,
	// a stream catching up at 100,000 events/s writes 100 times a second, not 1,000 (each write
	// is a round trip and an oplog entry); below 1,000 events/s SaveInterval decides.
	DefaultSaveEvery = 1000
	// DefaultSaveInterval is the default Checkpoint.SaveInterval.
	DefaultSaveInterval = time.Second
	// DefaultIdleInterval is the default Checkpoint.IdleInterval.
	DefaultIdleInterval = 5 * time.Minute
	// DefaultMaxUnflushed and DefaultMaxUnflushedFactor give the default
	// Checkpoint.MaxUnflushed: the larger of DefaultMaxUnflushed and
	// DefaultMaxUnflushedFactor × SaveEvery.
	DefaultMaxUnflushed       = 10_000
	DefaultMaxUnflushedFactor = 10
	// DefaultRetention is the default Checkpoint.Retention (30 days).
	DefaultRetention = 30 * 24 * time.Hour
	// MinRetentionFactor gives the shortest Checkpoint.Retention accepted:
	// MinRetentionFactor × IdleInterval.
	MinRetentionFactor = 2
)

// Checkpoint is the field list of watchtree.CheckpointPolicy, which documents the fields, their
// defaults and the bound of unflushed progress; the checkpointer actor applies it.
type Checkpoint struct {
	SaveEvery    int
	SaveInterval time.Duration
	IdleInterval time.Duration
	MaxUnflushed int
	Retention    time.Duration
	Ephemeral    bool
}

// withDefaults returns p with every zero field replaced by its default.
func (p Checkpoint) withDefaults() Checkpoint {
	if p.SaveEvery == 0 {
		p.SaveEvery = DefaultSaveEvery
	}
	if p.SaveInterval == 0 {
		p.SaveInterval = DefaultSaveInterval
	}
	if p.IdleInterval == 0 {
		p.IdleInterval = DefaultIdleInterval
	}
	if p.Retention == 0 {
		p.Retention = DefaultRetention
	}
	if p.MaxUnflushed == 0 {
		if p.SaveEvery > math.MaxInt/DefaultMaxUnflushedFactor {
			p.MaxUnflushed = math.MaxInt
		} else {
			p.MaxUnflushed = max(DefaultMaxUnflushed, p.SaveEvery*DefaultMaxUnflushedFactor)
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
		c.Add(field+".SaveEvery", "must be >= 1 (0 means the default %d), got %d", DefaultSaveEvery, p.SaveEvery)
		ok = false
	}
	if p.SaveInterval < 0 {
		c.Add(field+".SaveInterval", "must be > 0 (0 means the default %v), got %v", DefaultSaveInterval, p.SaveInterval)
	}
	if p.IdleInterval < 0 {
		c.Add(field+".IdleInterval", "must be > 0 (0 means the default %v), got %v", DefaultIdleInterval, p.IdleInterval)
	}
	if p.MaxUnflushed < 0 {
		c.Add(field+".MaxUnflushed", "must be >= SaveEvery (0 means the default, the larger of %d and %d × SaveEvery), got %d", DefaultMaxUnflushed, DefaultMaxUnflushedFactor, p.MaxUnflushed)
		ok = false
	}
	if p.Retention < 0 {
		c.Add(field+".Retention", "must be >= %d × IdleInterval (0 means the default %v), got %v", MinRetentionFactor, DefaultRetention, p.Retention)
		ok = false
	}
	if ok {
		d := p.withDefaults()
		if d.MaxUnflushed < d.SaveEvery {
			c.Add(field+".MaxUnflushed", "must be >= SaveEvery (%d), got %d", d.SaveEvery, d.MaxUnflushed)
		}
		if p.Retention > 0 && d.IdleInterval > 0 && p.Retention/MinRetentionFactor < d.IdleInterval {
			c.Add(field+".Retention", "must be >= %d × IdleInterval (%v), so that a running idle instance's checkpoint never expires, got %v",
				MinRetentionFactor, d.IdleInterval, p.Retention)
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
