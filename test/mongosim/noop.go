package mongosim

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// noopOp is the operation of a periodic no-op oplog entry: no change stream shows it, but it
// advances the cluster time, so an idle stream's postBatchResumeToken moves past it.
const noopOp = "noop"

// noopPollLimit bounds how long the no-op writer sleeps between looks at Options.Now, so that a
// test's fake clock that jumps past the interval gets its no-op within this much real time.
const noopPollLimit = time.Second

// runNoopWriter logs a no-op oplog entry whenever Options.NoopInterval has passed on
// Options.Now without any entry, until stop is closed, as a replica set's periodic no-op writer
// does (writePeriodicNoops, every 10s). Without it an idle stream's post-batch token never moves
// and its lag grows without limit, which a server never shows. A stepped-down node writes none.
func (e *engine) runNoopWriter(stop <-chan struct{}) {
	interval := e.s.opts.NoopInterval
	if interval < 0 {
		<-stop
		return
	}
	poll := min(interval, noopPollLimit)
	t := time.NewTicker(poll)
	defer t.Stop()
	last := e.s.opts.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			last = e.noopIfIdle(last, interval)
		}
	}
}

// noopIfIdle logs a no-op entry when nothing was logged for interval since last (the wall time
// of the latest entry seen) and returns the new latest wall time.
func (e *engine) noopIfIdle(last time.Time, interval time.Duration) time.Time {
	if primary, _ := e.s.state.roleInfo(); !primary {
		return last
	}
	now := e.s.opts.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.oplog.len(); l > 0 {
		if w := e.oplog.at(l - 1).wall; w.After(last) {
			last = w
		}
	}
	if now.Sub(last) < interval {
		return last
	}
	e.logLocked(&oplogEntry{op: noopOp, ts: e.clock.tick(), wall: now,
		opDesc: bson.D{{Key: "msg", Value: "periodic noop"}}})
	return now
}
