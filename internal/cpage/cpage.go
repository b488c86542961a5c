// Package cpage computes a stream's checkpoint age, the one definition behind the Prometheus
// adapter's watchtree_checkpoint_age_seconds and the OpenTelemetry adapter's
// watchtree.checkpoint.age: how long the oldest settled-but-unwritten event has waited for a
// checkpoint write, and 0 when the stored checkpoint covers every settled event.
//
// A stream's status tells how many events settled (Settled) and where its settled position is
// (SettledThrough); the Observer's Checkpointed events tell how many settlements each write
// covered. Unwritten settlements are the settled count minus the written one; 0 when the
// written position is at or after the settled position. An idle stream's settled position
// moves with its post-batch resume tokens while its checkpoint waits for the idle write (5
// min), so a moved position alone is no unwritten event: the counts decide. When settlements
// are unwritten, their age is measured from the latest reading or write that saw none (the
// oldest of them settled after it), so it is at most one reading late and never the time since
// an older write.
package cpage

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/observe"
)

// Reading is what Age needs of a stream's status (watchtree.StreamStatus's fields of the same
// names).
type Reading struct {
	Name           string
	Settled        uint64
	SettledThrough bson.Timestamp
	Checkpoint     bson.Raw
	CheckpointAt   time.Time
}

// Tracker follows the streams' checkpoint writes (OnEvent) and answers their age (Age). Safe
// for concurrent use; the zero value is not usable, use New.
type Tracker struct {
	mu      sync.Mutex
	streams map[string]*track
}

type track struct {
	written      uint64    // settlements covered by writes, summed from Checkpointed events
	baseSettled  uint64    // Settled at the latest reading known to have nothing unwritten
	baseWritten  uint64    // written at that reading
	seen         bool      // a reading was taken
	lastClean    time.Time // the latest reading or write that saw nothing unwritten
	pendingSince time.Time // when unwritten settlements were first seen; zero: none
	failed       bool      // the latest write failed
}

// New returns an empty Tracker.
func New() *Tracker { return &Tracker{streams: make(map[string]*track)} }

func (t *Tracker) get(name string) *track {
	tr := t.streams[name]
	if tr == nil {
		tr = &track{}
		t.streams[name] = tr
	}
	return tr
}

// OnEvent records checkpoint writes (Checkpointed, with the settlements they cover) and
// failures (CheckpointFailed: the settlements stay unwritten until a write succeeds). Other
// events are ignored.
func (t *Tracker) OnEvent(ev observe.Event) {
	switch e := ev.(type) {
	case observe.Checkpointed:
		t.mu.Lock()
		defer t.mu.Unlock()
		tr := t.get(e.Stream)
		tr.written += uint64(max(e.Settled, 0))
		tr.failed = false
	case observe.CheckpointFailed:
		t.mu.Lock()
		defer t.mu.Unlock()
		t.get(e.Stream).failed = true
	}
}

// Age returns the checkpoint age of r's stream at now, in seconds: 0 when the stored checkpoint
// covers every settled event, else how long the oldest unwritten settlement has waited (see the
// package comment for the estimate). The first reading of a stream counts what had settled
// until then as written, unless the written position is behind the settled one.
func (t *Tracker) Age(r Reading, now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.get(r.Name)
	_, ckTS, ok := tokentime.Of(r.Checkpoint)
	covered := ok && !tsLess(ckTS, r.SettledThrough)
	if !tr.seen || r.Settled < tr.baseSettled || (covered && !tr.failed) {
		// A clean point: the written position is at the settled one (or, at the first reading
		// or after the tree's counts restarted, nothing better is known).
		tr.seen = true
		tr.baseSettled, tr.baseWritten = r.Settled, tr.written
		if covered || !tr.failed {
			tr.lastClean, tr.pendingSince = now, time.Time{}
			return 0
		}
	}
	settled := r.Settled - tr.baseSettled
	written := tr.written - tr.baseWritten
	if settled <= written && !tr.failed {
		tr.lastClean, tr.pendingSince = now, time.Time{}
		return 0
	}
	if tr.pendingSince.IsZero() {
		// The oldest unwritten settlement came after the latest clean reading and after the
		// latest write (which would have covered it otherwise).
		tr.pendingSince = tr.lastClean
		if r.CheckpointAt.After(tr.pendingSince) {
			tr.pendingSince = r.CheckpointAt
		}
		if tr.pendingSince.IsZero() {
			tr.pendingSince = now
		}
	}
	return max(now.Sub(tr.pendingSince).Seconds(), 0)
}

func tsLess(a, b bson.Timestamp) bool { return a.T < b.T || (a.T == b.T && a.I < b.I) }
