package checkpointer

import (
	"context"
	"errors"
	"math"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// onProgress records a batch boundary: its PBRT becomes the position once every seq up to its
// through seq has settled (at once for an idle stream's empty batch).
func (c *checkpointer) onProgress(m *wire.Progress) {
	if c.fenced {
		return
	}
	if m.GetIncarnation() != c.incarnation {
		c.stale++
		return
	}
	v := c.t.version
	if !c.t.progress(m.GetThroughSeq(), m.GetPostBatchResumeToken()) {
		c.log.Warn("Progress with a decreasing through_seq dropped", zap.Uint64("through_seq", m.GetThroughSeq()),
			zap.Uint64("max_seq", c.t.maxSeq))
		return
	}
	if c.t.version != v {
		c.changed()
	}
}

// onSettled advances the low-water mark.
func (c *checkpointer) onSettled(ctx actor.Context, m *wire.SettledBatch) {
	if c.fenced {
		return
	}
	for _, r := range m.GetRuns() {
		c.recvTotal += uint64(r.GetCount())
	}
	if m.GetIncarnation() != c.incarnation {
		c.stale++
		c.flow(ctx, false)
		return
	}
	v := c.t.version
	for _, r := range m.GetRuns() {
		first, n := r.GetFirstSeq(), uint64(r.GetCount())
		last := first + n - 1
		if n == 0 || last < first {
			c.log.Warn("settlement run dropped: empty or past the last seq", zap.Uint64("first_seq", first),
				zap.Uint64("count", n))
			continue
		}
		// Only the run's last seq carries the token: the low-water mark passes the run whole
		// or stops before it, so the position is never one of the others.
		for seq := first; seq <= min(last, c.t.maxSeq); seq++ {
			var token []byte
			inv := false
			if seq == last {
				token, inv = r.GetLastToken(), r.GetInvalidate()
			}
			switch c.t.settle(seq, token, inv) {
			case settledOK:
				c.settledTotal++
			case settledDuplicate:
				c.log.Debug("duplicate settlement ignored", zap.Uint64("seq", seq))
			}
		}
		if last > c.t.maxSeq {
			c.log.Warn("settlement of unannounced seqs dropped (Progress must come first)",
				zap.Uint64("from_seq", max(first, c.t.maxSeq+1)), zap.Uint64("to_seq", last), zap.Uint64("max_seq", c.t.maxSeq))
		}
	}
	c.t.advance()
	if c.t.version != v {
		c.changed()
	}
	c.flow(ctx, false)
	c.maybeSave(ctx, false)
}

// changed arms the interval timer at the first position change not covered by a write issued:
// Checkpoint.SaveInterval when events settled since the last write issued,
// Checkpoint.IdleInterval when only the PBRT moved. A settlement during an idle wait re-arms the
// shorter timer.
func (c *checkpointer) changed() {
	if c.cfg.Checkpoint.Ephemeral || c.t.version == c.persistedVersion || c.intervalDue {
		return
	}
	idle := c.settledTotal == c.coveredSettled
	if c.intervalTimer != nil {
		if !c.intervalIdle || idle {
			return
		}
		c.intervalTimer.Stop()
	}
	c.intervalIdle = idle
	c.intervalTimer = c.after(tickInterval)
}

func (c *checkpointer) unflushed() int { return int(c.settledTotal - c.flushedSettled) }

// maybeSave issues a write of the current position when one is due: SaveEvery settlements since
// the last write issued, the interval timer fired, a retry is due or a Flush waits (force). At
// most one write is in flight; a failed write blocks unforced writes until its retry.
func (c *checkpointer) maybeSave(ctx actor.Context, force bool) {
	if c.fenced || c.saving || c.w == nil {
		return
	}
	if c.cfg.Checkpoint.Ephemeral {
		c.keepInMemory(ctx)
		return
	}
	if c.t.version == c.persistedVersion {
		// The durable position is the current one: settlements since the last write (above a
		// low-water mark that did not move) are covered as well as they can be, so they do not
		// count towards MaxUnflushed. They still count towards SaveEvery: once the low-water
		// mark moves, the write is due at once.
		c.flushedSettled = c.settledTotal
		c.recvFlushed = c.recvTotal
		c.intervalDue = false
		treekit.StopTimer(&c.retryTimer)
		c.answerWaiters(ctx, c.persistedVersion, nil)
		c.flow(ctx, false)
		return
	}
	if c.retryTimer != nil && !force {
		return
	}
	countDue := c.settledTotal-c.coveredSettled >= uint64(c.cfg.Checkpoint.SaveEvery)
	if !force && !countDue && !c.intervalDue {
		return
	}
	c.submitSave()
}

// keepInMemory is an ephemeral stream's write: the position stays in memory only, and counts
// as flushed at once, so MaxUnflushed never holds the dispatcher back and a Flush is answered
// without any store I/O.
func (c *checkpointer) keepInMemory(ctx actor.Context) {
	c.persisted, c.persistedVersion = c.t.pos, c.t.version
	c.writtenSettled, c.coveredSettled, c.flushedSettled = c.settledTotal, c.settledTotal, c.settledTotal
	c.recvFlushed = c.recvTotal
	c.answerWaiters(ctx, c.persistedVersion, nil)
	c.flow(ctx, false)
}

func (c *checkpointer) submitSave() {
	c.saveGen++
	c.saving = true
	c.coveredSettled = c.settledTotal
	c.intervalDue = false
	treekit.StopTimer(&c.intervalTimer)
	treekit.StopTimer(&c.retryTimer)
	pos := c.t.pos
	res := saveResult{inst: c.inst, gen: c.saveGen, cp: c.snapshot(pos), pos: pos, version: c.t.version,
		settled: c.settledTotal, recv: c.recvTotal, lwm: c.t.lwm}
	st := c.cfg.Store
	c.w.submit(func(ctx context.Context) any {
		r := res
		r.err = st.Save(ctx, r.cp)
		return &r
	})
}

func (c *checkpointer) onSaveResult(ctx actor.Context, r *saveResult) {
	c.saving = false
	refused := r.err != nil && errors.Is(r.err, store.ErrBackward)
	if refused {
		// The store holds a position past this one: what this write would have covered is
		// covered already. It is not a failure (nothing to retry, no flow to pause) and not a
		// fence (this writer still owns the scope); the stored position stands.
		c.refused(r)
		r.err = nil
	}
	if r.err != nil {
		if errors.Is(r.err, store.ErrFenced) {
			c.fence(ctx, r.err)
			return
		}
		c.coveredSettled = c.writtenSettled
		c.answerWaiters(ctx, r.version, r.err)
		c.saveFailed(ctx, r.err)
		if len(c.waiters) > 0 {
			c.maybeSave(ctx, true) // a Flush that arrived during the failed write gets its own attempt
		}
		return
	}
	covered := int(r.settled - c.writtenSettled)
	c.writtenSettled = r.settled
	c.flushedSettled = max(c.flushedSettled, r.settled)
	c.recvFlushed = max(c.recvFlushed, r.recv)
	c.persisted, c.persistedVersion = r.pos, r.version
	if c.failures > 0 {
		c.log.Info("checkpoint store recovered", zap.Int("failed_attempts", c.failures))
	}
	c.failures = 0
	cp := r.cp
	if !refused {
		c.log.Debug("checkpoint written", zap.String("source", r.cp.Source), zap.Uint64("lwm", r.lwm),
			zap.Int("settled", covered))
		c.report(observe.Checkpointed{Meta: c.meta(), Token: cp.Token, Settled: covered})
		c.reportWrite(ctx, cp, len(c.waiters) > 0)
	}
	c.answerWaiters(ctx, r.version, nil)
	c.flow(ctx, false)
	c.maybeSave(ctx, len(c.waiters) > 0)
}

// refused reports a write the store refused as behind its stored position: every time to the
// Observer (and so the metrics), once per checkpointer to the log with both positions (the
// error names them), later ones at debug level so that a stream that keeps meeting a newer
// record does not flood the log.
func (c *checkpointer) refused(r *saveResult) {
	c.refusals++
	c.report(observe.CheckpointRefused{Meta: c.meta(), Token: r.cp.Token, Err: r.err})
	if c.refusals == 1 {
		c.log.Warn("checkpoint write refused: the store holds a later position, which stands",
			zap.Error(r.err), zap.String("source", r.cp.Source), zap.Uint64("lwm", r.lwm))
		return
	}
	c.log.Debug("checkpoint write refused again", zap.Error(r.err), zap.Int("refusals", c.refusals))
}

// saveFailed reports a failed write and schedules its retry after the backoff delay.
func (c *checkpointer) saveFailed(ctx actor.Context, err error) {
	c.failures++
	if c.retryTimer != nil {
		c.retryTimer.Stop()
	}
	d := c.cfg.retryDelay(c.failures)
	c.retryTimer = c.after(tickRetry)
	unflushed := c.unflushed()
	c.log.Warn("checkpoint write failed; retrying", zap.Error(err), zap.Int("attempt", c.failures),
		zap.Duration("retry_in", d), zap.Int("unflushed", unflushed))
	c.report(observe.CheckpointFailed{Meta: c.meta(), Err: err, Unflushed: unflushed})
	c.flow(ctx, false)
}

// settleLimit is the FlowControl.settle_limit of the current dispatcher: the settlements it may
// have taken since it attached, events in flight and unused credit included. Saturates at 0 (no
// credit) and at MaxUint64.
func (c *checkpointer) settleLimit() uint64 {
	limit := c.recvFlushed + uint64(c.cfg.Checkpoint.MaxUnflushed)
	if limit < c.recvFlushed {
		return math.MaxUint64
	}
	if limit < c.recvAtAttach {
		return 0
	}
	return limit - c.recvAtAttach
}

// flow updates the pause state (the settle limit is reached while the store fails) and sends
// FlowControl to the dispatcher when the pause state changed since the last one sent, the
// limit moved as limitNeeded says, or always when force (a dispatcher just attached).
func (c *checkpointer) flow(ctx actor.Context, force bool) {
	unflushed := c.recvTotal - c.recvFlushed
	paused := c.failures > 0 && unflushed >= uint64(c.cfg.Checkpoint.MaxUnflushed)
	if paused != c.paused {
		c.paused = paused
		if paused {
			c.log.Warn("MaxUnflushed settled events are unwritten: the dispatcher gets no more credit until a write succeeds",
				zap.Uint64("unflushed", unflushed), zap.Int("max_unflushed", c.cfg.Checkpoint.MaxUnflushed))
		} else {
			c.log.Info("progress flushed: the dispatcher gets credit again", zap.Uint64("unflushed", unflushed))
		}
	}
	limit := c.settleLimit()
	if c.dispatcher == nil || (!force && c.flowSent && paused == c.pausedSent && !c.limitNeeded(limit)) {
		return
	}
	c.flowSent, c.limitSent, c.pausedSent = true, limit, paused
	ctx.Send(c.dispatcher, &wire.FlowControl{Paused: paused, SettleLimit: &limit, Attach: c.attach})
}

// limitNeeded reports whether the dispatcher should get limit, the settle limit after a write,
// instead of the one last sent: when it grew by a quarter of MaxUnflushed, or when the
// dispatcher has used half of the one it has. A write every SaveEvery settlements raises the
// limit each time, and a FlowControl per write would wake the dispatcher once more per
// change-stream batch in a catch-up; the dispatcher still always has at least a quarter of
// MaxUnflushed fewer than the bound, and once it has used half its limit the next write sends
// the new one, so it never waits for a limit that was reached and not sent.
func (c *checkpointer) limitNeeded(limit uint64) bool {
	if limit == c.limitSent {
		return false
	}
	m := uint64(c.cfg.Checkpoint.MaxUnflushed)
	if limit < c.limitSent || limit-c.limitSent >= m/4 {
		return true
	}
	used := c.recvTotal - c.recvAtAttach // settlements the dispatcher sent since it attached
	return used >= c.limitSent || c.limitSent-used <= m/2
}

// onFlush writes the current position now and answers Flushed once the write ended.
func (c *checkpointer) onFlush(ctx actor.Context) {
	to := ctx.Sender()
	// The settled position goes first, ahead of Flushed: the status after a graceful stop (and
	// the AwaitCaughtUp waiters it answers) holds what the drain settled.
	c.reportSettled(ctx, true)
	if c.fenced {
		if to != nil {
			ctx.Send(to, &wire.Flushed{Fenced: true, Error: store.ErrFenced.Error(), LowWaterMark: c.t.lwm})
		}
		return
	}
	if c.t.version == c.persistedVersion && !c.saving {
		if to != nil {
			c.sendFlushed(ctx, to, nil)
		}
		return
	}
	if to != nil {
		c.waiters = append(c.waiters, flushWaiter{to: to, version: c.t.version})
	}
	c.maybeSave(ctx, true)
}

// answerWaiters answers the Flush requests covered by a write of version (with its error).
func (c *checkpointer) answerWaiters(ctx actor.Context, version uint64, err error) {
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if w.version <= version {
			c.sendFlushed(ctx, w.to, err)
			continue
		}
		keep = append(keep, w)
	}
	clear(c.waiters[len(keep):])
	c.waiters = keep
}

func (c *checkpointer) sendFlushed(ctx actor.Context, to *actor.PID, err error) {
	ctx.Send(to, &wire.Flushed{Token: c.persisted.token, StartAfter: c.persisted.startAfter,
		LowWaterMark: c.t.lwm, Error: errString(err)})
}
