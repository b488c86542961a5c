package watchtree

import (
	"sync"
	"time"

	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/observe"
)

// CheckpointAges computes each stream's checkpoint age, the one definition behind the
// Prometheus adapter's watchtree_checkpoint_age_seconds and the OpenTelemetry adapter's
// watchtree.checkpoint.age (and any other exporter's): how long the oldest settled-but-unwritten
// event has waited for a checkpoint write, in seconds, and 0 when the stored checkpoint covers
// every settled event.
//
// A StreamStatus tells how many events settled (Settled) and where the settled position is
// (SettledThrough); the Observer's Checkpointed events tell how many settlements each write
// covered. Unwritten settlements are the settled count minus the written one; none when the
// written position is at or after the settled position. An idle stream's settled position moves
// with its post-batch resume tokens while its checkpoint waits for the idle write (5 min), so a
// moved position alone is no unwritten event: the counts decide. When settlements are
// unwritten, their age is measured from the latest reading or write that saw none (the oldest of
// them settled after it), so it is at most one reading late and never the time since an older
// write.
//
// Feed it every Observer event (OnEvent) and ask it at each reading (Age). Safe for concurrent
// use; the zero value is not usable, use NewCheckpointAges.
type CheckpointAges struct {
	mu      sync.Mutex
	streams map[string]*cpTrack
}

// cpTrack is what CheckpointAges knows of one stream.
type cpTrack struct {
	written      uint64    // settlements covered by writes, summed from Checkpointed events
	baseSettled  uint64    // Settled at the latest reading known to have nothing unwritten
	baseWritten  uint64    // written at that reading
	seen         bool      // a reading was taken
	lastClean    time.Time // the latest reading or write that saw nothing unwritten
	pendingSince time.Time // when unwritten settlements were first seen; zero: none
	failed       bool      // the latest write failed
}

// NewCheckpointAges returns a CheckpointAges that knows no stream yet.
func NewCheckpointAges() *CheckpointAges {
	return &CheckpointAges{streams: make(map[string]*cpTrack)}
}

func (c *CheckpointAges) get(name string) *cpTrack {
	tr := c.streams[name]
	if tr == nil {
		tr = &cpTrack{}
		c.streams[name] = tr
	}
	return tr
}

// OnEvent records checkpoint writes (Checkpointed, with the settlements they cover) and
// failures (CheckpointFailed: the settlements stay unwritten until a write succeeds). Other
// events are ignored.
func (c *CheckpointAges) OnEvent(ev observe.Event) {
	switch e := ev.(type) {
	case observe.Checkpointed:
		c.mu.Lock()
		defer c.mu.Unlock()
		tr := c.get(e.Stream)
		tr.written += uint64(max(e.Settled, 0))
		tr.failed = false
	case observe.CheckpointFailed:
		c.mu.Lock()
		defer c.mu.Unlock()
		c.get(e.Stream).failed = true
	}
}

// Age returns the checkpoint age of st's stream at now, in seconds: 0 when the stored
// checkpoint covers every settled event, else how long the oldest unwritten settlement has
// waited (see CheckpointAges for the estimate). It reads st's Name, Settled, SettledThrough,
// Checkpoint and CheckpointAt. The first reading of a stream counts what had settled until then
// as written, unless the written position is behind the settled one.
func (c *CheckpointAges) Age(st StreamStatus, now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	tr := c.get(st.Name)
	_, ckTS, ok := tokentime.Of(st.Checkpoint)
	covered := ok && !ckTS.Before(st.SettledThrough)
	if !tr.seen || st.Settled < tr.baseSettled || (covered && !tr.failed) {
		// A clean point: the written position is at the settled one (or, at the first reading
		// or after the tree's counts restarted, nothing better is known).
		tr.seen = true
		tr.baseSettled, tr.baseWritten = st.Settled, tr.written
		if covered || !tr.failed {
			tr.lastClean, tr.pendingSince = now, time.Time{}
			return 0
		}
	}
	settled := st.Settled - tr.baseSettled
	written := tr.written - tr.baseWritten
	if settled <= written && !tr.failed {
		tr.lastClean, tr.pendingSince = now, time.Time{}
		return 0
	}
	if tr.pendingSince.IsZero() {
		// The oldest unwritten settlement came after the latest clean reading and after the
		// latest write (which would have covered it otherwise).
		tr.pendingSince = tr.lastClean
		if st.CheckpointAt.After(tr.pendingSince) {
			tr.pendingSince = st.CheckpointAt
		}
		if tr.pendingSince.IsZero() {
			tr.pendingSince = now
		}
	}
	return max(now.Sub(tr.pendingSince).Seconds(), 0)
}
