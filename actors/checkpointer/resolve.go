package checkpointer

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// StartFrom.source values other than store sources.
const (
	sourceMemory = "memory"
	sourceLatest = "latest"
	sourceAt     = "at"
)

// onResolveStart runs the resume cascade:
//  1. the in-memory position (newest settled position of this instance, even if not yet
//     flushed), with resumeAfter (startAfter after an invalidate, startAtOperationTime when only
//     an operation time is known);
//  2. the stored checkpoint;
//  3. no checkpoint: capture the current position, persist it (Source "initial") before
//     replying, reply resumeAfter it. A capture or persist failure is a transient FAIL.
//
// StartPosition Latest/At replace 1–3 until the first start succeeded. Steps 2–3 run on the
// worker goroutine.
func (c *checkpointer) onResolveStart(ctx actor.Context, m *messages.ResolveStart) {
	to := ctx.Sender()
	if to == nil {
		c.log.Warn("ResolveStart without a sender dropped (send it as a request)",
			zap.Uint64("incarnation", m.GetIncarnation()))
		return
	}
	inc := m.GetIncarnation()
	if c.fenced {
		ctx.Send(to, &messages.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_FAIL,
			Terminal: true, Reason: store.ErrFenced.Error()})
		return
	}
	if inc < c.incarnation {
		c.stale++
		c.log.Debug("stale ResolveStart dropped", zap.Uint64("incarnation", inc), zap.Uint64("current", c.incarnation))
		return
	}
	if inc > c.incarnation {
		c.incarnation = inc
		c.t.rebase()
	}
	c.reqSeq++
	c.resolving = &pendingStart{req: c.reqSeq, inc: inc, to: to}
	c.log.Debug("resolving the start position", zap.Uint64("incarnation", inc))
	mode := c.cfg.StartPosition
	if c.sh.firstDone.Load() {
		mode = policy.Resume
	}
	if mode.Kind() == policy.StartResume && !c.t.pos.empty() {
		c.replyStart(ctx, c.t.pos, sourceMemory)
		return
	}
	c.w.submit(c.resolveJob(c.reqSeq, mode, c.snapshot(position{})))
}

// snapshot builds the checkpoint record of p as of now (on the actor goroutine: Epoch is read
// here).
func (c *checkpointer) snapshot(p position) store.Checkpoint {
	return store.Checkpoint{Stream: c.cfg.Stream, Token: p.token, ClusterTime: p.opTime, Source: p.source,
		Epoch: c.cfg.Epoch(), Owner: c.cfg.Owner, Settled: c.settledTotal, UpdatedAt: c.cfg.Clock.Now()}
}

// resolveJob loads the checkpoint, or captures and persists the start position. base carries
// the epoch, owner and settled count to write.
func (c *checkpointer) resolveJob(req uint64, mode policy.StartPosition, base store.Checkpoint) job {
	cfg, inst := c.cfg, c.inst
	return func(ctx context.Context) any {
		r := &resolveResult{inst: inst, req: req}
		cp, found, err := cfg.Store.Load(ctx, cfg.Stream)
		if err != nil {
			r.failWith("load checkpoint", err)
			return r
		}
		if found && (cp.Token != nil || !cp.ClusterTime.IsZero()) {
			if mode.Kind() == policy.StartResume {
				if base.Epoch > 0 && cp.Epoch > base.Epoch {
					// A newer term wrote it: this one is deposed before it starts.
					r.fenced = fmt.Errorf("checkpointer: stream %q: start under epoch %d, stored epoch %d: %w",
						cfg.Stream, base.Epoch, cp.Epoch, store.ErrFenced)
					return r
				}
				if cp.Epoch < base.Epoch {
					// A new leadership epoch (SINGLE_LEADER): claim the position under it
					// before anything is consumed, so that every later write of an older
					// epoch (a deposed leader) is fenced.
					claimed := cp
					claimed.Epoch, claimed.Owner, claimed.UpdatedAt = base.Epoch, base.Owner, cfg.Clock.Now()
					if err := cfg.Store.Save(ctx, claimed); err != nil {
						if errors.Is(err, store.ErrFenced) {
							r.fenced = err
							return r
						}
						r.failWith("claim the checkpoint under the new epoch", err)
						return r
					}
					cp = claimed
				}
				p := positionOf(cp)
				r.pos, r.cp, r.source = &p, &cp, cp.Source
				return r
			}
			r.discarded = &cp
		}
		var p position
		switch mode.Kind() {
		case policy.StartAt:
			p = position{opTime: mode.OperationTime(), source: store.SourceInitial}
			r.source = sourceAt
		default:
			tok, ts, err := cfg.Positions.Current(ctx)
			if err != nil {
				r.failWith("capture the current position", err)
				return r
			}
			if len(tok) == 0 {
				r.fail = "capture the current position: empty resume token"
				return r
			}
			p = position{token: tok, opTime: ts, source: store.SourceInitial}
			r.source = store.SourceInitial
			if mode.Kind() == policy.StartLatest {
				r.source = sourceLatest
			}
		}
		rec := base
		rec.Token, rec.ClusterTime, rec.Source = p.token, p.opTime, p.source
		rec.UpdatedAt = cfg.Clock.Now()
		if err := cfg.Store.Save(ctx, rec); err != nil {
			if errors.Is(err, store.ErrFenced) {
				r.fenced = err
				return r
			}
			r.failWith("persist the start position", err)
			return r
		}
		r.pos, r.cp, r.written, r.applied = &p, &rec, true, mode.Kind() != policy.StartResume
		return r
	}
}

// onHistoryLost applies OnHistoryLost to the start position the stream actor could not open.
func (c *checkpointer) onHistoryLost(ctx actor.Context, m *messages.HistoryLost) {
	to := ctx.Sender()
	if to == nil {
		c.log.Warn("HistoryLost without a sender dropped (send it as a request)",
			zap.Uint64("incarnation", m.GetIncarnation()))
		return
	}
	inc := m.GetIncarnation()
	if c.fenced {
		ctx.Send(to, &messages.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_FAIL,
			Terminal: true, Reason: store.ErrFenced.Error()})
		return
	}
	if inc < c.incarnation {
		c.stale++
		c.log.Debug("stale HistoryLost dropped", zap.Uint64("incarnation", inc), zap.Uint64("current", c.incarnation))
		return
	}
	if inc > c.incarnation {
		c.incarnation = inc
		c.t.rebase()
	}
	from := c.lastStart
	hl := c.cfg.OnHistoryLost
	reason := fmt.Sprintf("code %d: %s", m.GetCode(), m.GetMessage())
	c.log.Warn("change stream history lost", zap.Int32("code", m.GetCode()), zap.String("message", m.GetMessage()),
		zap.Stringer("policy", hl), zap.String("from_source", from.source))
	c.emit("HistoryLost", func(e Events) {
		e.HistoryLost(HistoryLostEvent{Code: m.GetCode(), Message: m.GetMessage(), Policy: hl.String(),
			FromToken: from.token, FromTime: from.opTime})
	})
	if hl.Kind() == policy.HistoryFail {
		terr := historyLostError(c.cfg.Stream, m.GetCode(), m.GetMessage())
		c.resolving = nil
		ctx.Send(to, &messages.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_FAIL,
			Terminal: true, Reason: terr.Error()})
		c.log.Error("history lost under OnHistoryLost Fail: the stream fails terminally", zap.Error(terr))
		treekit.Fail(ctx, terr)
		return
	}
	c.reqSeq++
	c.resolving = &pendingStart{req: c.reqSeq, inc: inc, to: to}
	c.w.submit(c.historyJob(c.reqSeq, inc, hl, from, reason, c.snapshot(position{})))
}

// historyJob captures the current position, runs the rebuild (Rebuild), records the gap
// (retried with backoff until it succeeds or the checkpointer stops) and persists the position.
func (c *checkpointer) historyJob(req, inc uint64, hl policy.HistoryLost, from position, reason string, base store.Checkpoint) job {
	cfg, inst, log := c.cfg, c.inst, c.log
	return func(ctx context.Context) any {
		r := &resolveResult{inst: inst, req: req}
		if from.empty() {
			// The start position came from an earlier instance: the stored one is the best
			// knowledge of where the gap begins.
			if cp, ok, err := cfg.Store.Load(ctx, cfg.Stream); err == nil && ok {
				from = positionOf(cp)
			}
		}
		tok, ts, err := cfg.Positions.Current(ctx)
		if err != nil {
			r.failWith("capture the current position after history lost", err)
			return r
		}
		var p position
		gapPolicy := store.GapResumeFromNow
		switch hl.Kind() {
		case policy.HistoryRebuild:
			if ts.IsZero() {
				r.fail = "capture the current position after history lost: no operation time"
				return r
			}
			if err := hl.RebuildFunc()(ctx); err != nil {
				r.failWith("rebuild", err)
				return r
			}
			p = position{opTime: ts, source: store.SourceRebuild}
			gapPolicy = store.GapRebuild
		default:
			if len(tok) == 0 {
				r.fail = "capture the current position after history lost: empty resume token"
				return r
			}
			p = position{token: tok, opTime: ts, source: store.SourceResumeFromNow}
		}
		now := cfg.Clock.Now()
		gap := store.Gap{ID: fmt.Sprintf("%s/%d/%d", cfg.Stream, now.UnixNano(), inc), Stream: cfg.Stream,
			FromToken: from.token, FromTime: from.opTime, ToToken: tok, ToTime: ts,
			Policy: gapPolicy, Reason: reason, At: now}
		for n := 1; ; n++ {
			err := cfg.Gaps.RecordGap(ctx, gap)
			if err == nil {
				break
			}
			d := cfg.retryDelay(n)
			log.Warn("gap record write failed; retrying", zap.Error(err), zap.Int("attempt", n), zap.Duration("retry_in", d))
			if !sleep(ctx, cfg.Clock, d) {
				return nil
			}
		}
		r.gap = &gap
		rec := base
		rec.Token, rec.ClusterTime, rec.Source = p.token, p.opTime, p.source
		rec.UpdatedAt = cfg.Clock.Now()
		r.pos, r.source = &p, p.source
		if err := cfg.Store.Save(ctx, rec); err != nil {
			if errors.Is(err, store.ErrFenced) {
				r.fenced = err
				return r
			}
			// The gap is durable: start from p anyway; the save machinery retries the write.
			r.persist = err
			return r
		}
		r.cp, r.written = &rec, true
		return r
	}
}

// failWith fails the start at step with err, which travels in the StartFrom FAIL (its cause) so
// that the supervisor's classifier sees the server's code.
func (r *resolveResult) failWith(step string, err error) {
	r.fail, r.failErr = step+": "+err.Error(), err
}

func (c *checkpointer) onResolveResult(ctx actor.Context, r *resolveResult) {
	if r.gap != nil {
		g := *r.gap
		c.log.Info("gap recorded", zap.String("id", g.ID), zap.String("policy", g.Policy), zap.String("reason", g.Reason))
		c.emit("GapRecorded", func(e Events) { e.GapRecorded(g) })
	}
	if r.fenced != nil {
		c.fence(ctx, r.fenced)
		return
	}
	p := c.resolving
	if p == nil || p.req != r.req {
		c.stale++
		c.log.Debug("stale start resolution dropped", zap.Uint64("req", r.req))
		return
	}
	if r.fail != "" {
		c.resolving = nil
		c.log.Warn("start position not resolved", zap.String("reason", r.fail))
		ctx.Send(p.to, &messages.StartFrom{Incarnation: p.inc, Kind: messages.StartKind_START_KIND_FAIL, Reason: r.fail,
			Cause: errdetail.Of(r.failErr)})
		return
	}
	if d := r.discarded; d != nil {
		c.log.Warn("saved checkpoint ignored by the start position", zap.Stringer("start_position", c.cfg.StartPosition),
			zap.String("saved_source", d.Source), zap.Time("saved_at", d.UpdatedAt))
	}
	if r.applied {
		c.sh.firstDone.Store(true)
	}
	c.t.setPosition(*r.pos)
	if r.cp != nil {
		c.persisted, c.persistedVersion = *r.pos, c.t.version
	}
	if r.written {
		cp := *r.cp
		c.emit("Checkpointed", func(e Events) {
			e.Checkpointed(CheckpointedEvent{Checkpoint: cp, LowWaterMark: c.t.lwm})
		})
		c.reportWrite(ctx, cp)
	}
	c.replyStart(ctx, *r.pos, r.source)
	if r.persist != nil {
		// The new position is not durable: count it as a failed write (reported, retried).
		c.saveFailed(ctx, r.persist)
	}
}

// replyStart answers the pending resolution with p.
func (c *checkpointer) replyStart(ctx actor.Context, p position, source string) {
	pend := c.resolving
	c.resolving = nil
	sf := &messages.StartFrom{Incarnation: pend.inc, NextSeq: c.t.nextSeq(), Source: source}
	switch {
	case p.token != nil && p.startAfter:
		sf.Kind, sf.Token = messages.StartKind_START_KIND_START_AFTER, p.token
	case p.token != nil:
		sf.Kind, sf.Token = messages.StartKind_START_KIND_RESUME_AFTER, p.token
	case !p.opTime.IsZero():
		sf.Kind = messages.StartKind_START_KIND_START_AT_OPERATION_TIME
		sf.OperationTime = &messages.OperationTime{Seconds: p.opTime.T, Increment: p.opTime.I}
	default:
		sf.Kind, sf.Reason = messages.StartKind_START_KIND_FAIL, "no start position"
		ctx.Send(pend.to, sf)
		return
	}
	c.lastStart = p
	c.log.Info("start position resolved", zap.Uint64("incarnation", pend.inc), zap.Stringer("kind", sf.Kind),
		zap.String("source", source), zap.Uint64("next_seq", sf.NextSeq))
	ctx.Send(pend.to, sf)
}
