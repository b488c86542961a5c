package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"github.com/watchtree/watchtree/internal/policyx"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
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
//  2. the stored checkpoint of the scope; for an instance without one, the stream's shared
//     checkpoint of an earlier version, persisted as its own first (migrate);
//  3. no checkpoint: capture the current position, persist it (Source "initial") before
//     replying, reply resumeAfter it. A capture or persist failure is a transient FAIL.
//
// StartPosition Latest/At replace 1–3 until the first start succeeded. An Ephemeral stream
// takes 1, else captures the current position without persisting it. Steps 2–3 run on the
// worker goroutine.
func (c *checkpointer) onResolveStart(ctx actor.Context, m *wire.ResolveStart) {
	inc := m.GetIncarnation()
	to, ok := c.admitStart(ctx, "ResolveStart", inc)
	if !ok {
		return
	}
	c.reqSeq++
	c.resolving = &pendingStart{req: c.reqSeq, inc: inc, to: to}
	c.log.Debug("resolving the start position", zap.Uint64("incarnation", inc))
	if done := m.GetSnapshotDone(); done != "" && done == c.snapPending {
		c.log.Info("snapshot finished; streaming from its handoff position", zap.String("snapshot", done))
		c.snapPending = ""
	}
	if c.cfg.Checkpoint.Ephemeral {
		// Nothing is stored: the position kept in memory while the tree lives, else the current
		// one, never persisted.
		if !c.t.pos.empty() {
			c.replyStart(ctx, c.t.pos, sourceMemory)
			return
		}
		if policyx.SnapshotEnabled(c.cfg.Snapshot) && c.cfg.Snapshots != nil {
			c.w.submit(c.ephemeralSnapshotJob(c.reqSeq))
			return
		}
		c.w.submit(c.currentJob(c.reqSeq))
		return
	}
	mode := c.cfg.StartPosition
	if c.sh.firstDone.Load() {
		mode = policy.Resume
	}
	if policyx.StartKindOf(mode) == policyx.StartResume && !c.t.pos.empty() {
		c.replyStart(ctx, c.t.pos, sourceMemory)
		return
	}
	c.w.submit(c.resolveJob(c.reqSeq, mode, c.snapshot(position{})))
}

// admitStart is the common prologue of a start request (what: ResolveStart or HistoryLost) of
// incarnation inc. It drops one without a sender (there is no one to answer) or of an older
// incarnation, and answers a terminal FAIL once fenced; a newer incarnation rebases the
// low-water mark for the cursor it will open. ok: handle the request and answer to.
func (c *checkpointer) admitStart(ctx actor.Context, what string, inc uint64) (to *actor.PID, ok bool) {
	to = ctx.Sender()
	if to == nil {
		c.log.Warn(what+" without a sender dropped (send it as a request)", zap.Uint64("incarnation", inc))
		return nil, false
	}
	if c.fenced {
		ctx.Send(to, &wire.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_FAIL,
			Terminal: true, Reason: store.ErrFenced.Error()})
		return nil, false
	}
	if inc < c.incarnation {
		c.stale++
		c.log.Debug("stale "+what+" dropped", zap.Uint64("incarnation", inc), zap.Uint64("current", c.incarnation))
		return nil, false
	}
	if inc > c.incarnation {
		c.incarnation = inc
		c.t.rebase()
	}
	return to, true
}

// snapshot builds the checkpoint record of p as of now (on the actor goroutine: Epoch is read
// here).
func (c *checkpointer) snapshot(p position) store.Checkpoint {
	rec := store.Checkpoint{Stream: c.cfg.Stream, Instance: c.cfg.Instance, Token: p.token, ClusterTime: p.opTime,
		Source: p.source, Epoch: c.cfg.Epoch(), Owner: c.cfg.Owner, Settled: c.settledTotal}
	return c.cfg.stamp(rec, c.cfg.Clock.Now())
}

// scope is the key of the stream's checkpoint and gap records: the stream and, for an
// AllInstances stream, the instance.
func (c Config) scope() store.Scope { return store.Scope{Stream: c.Stream, Instance: c.Instance} }

// stamp sets rec's write time to now and, for an instance's own checkpoint, its expiry:
// now + Checkpoint.Retention. The shared position never expires.
func (c Config) stamp(rec store.Checkpoint, now time.Time) store.Checkpoint {
	rec.UpdatedAt, rec.ExpiresAt = now, time.Time{}
	if c.Instance != "" {
		rec.ExpiresAt = now.Add(c.Checkpoint.Retention)
	}
	return rec
}

// capture captures the current position for step (a resume token is required); on failure it
// fails r, naming step, and ok is false.
func (c Config) capture(ctx context.Context, r *resolveResult, step string) (tok bson.Raw, ts bson.Timestamp, ok bool) {
	tok, ts, err := c.Positions.Current(ctx)
	if err != nil {
		r.failWith(step, err)
		return nil, bson.Timestamp{}, false
	}
	if len(tok) == 0 {
		r.fail = step + ": empty resume token"
		return nil, bson.Timestamp{}, false
	}
	return tok, ts, true
}

// currentJob captures the current position for an ephemeral stream: no load, no write.
func (c *checkpointer) currentJob(req uint64) job {
	cfg, inst := c.cfg, c.inst
	return func(ctx context.Context) any {
		r := &resolveResult{inst: inst, req: req}
		tok, ts, ok := cfg.capture(ctx, r, "capture the current position")
		if !ok {
			return r
		}
		r.pos, r.source = &position{token: tok, opTime: ts, source: store.SourceInitial}, sourceLatest
		return r
	}
}

// ephemeralSnapshotJob starts an Ephemeral stream that copies its collection first: it captures
// the current position as the snapshot's handoff and records the snapshot (in the in-memory
// store an Ephemeral stream is given), but writes no checkpoint. Every new tree of such a stream,
// a new process, copies again: what it preloads lives in memory too.
func (c *checkpointer) ephemeralSnapshotJob(req uint64) job {
	cfg, inst := c.cfg, c.inst
	return func(ctx context.Context) any {
		r := &resolveResult{inst: inst, req: req}
		if p, ok := cfg.beginSnapshot(ctx, r); ok {
			r.pos, r.source = &p, store.SourceSnapshot
		}
		return r
	}
}

// beginSnapshot starts an initial snapshot: it captures the handoff position and records the
// snapshot (r.snapshot, r.newSnap) before anything is read, so that a crash after it resumes the
// copy instead of skipping it. On failure it fails r and ok is false.
func (c Config) beginSnapshot(ctx context.Context, r *resolveResult) (p position, ok bool) {
	tok, ts, ok := c.capture(ctx, r, "capture the snapshot's handoff position")
	if !ok {
		return position{}, false
	}
	sn := newSnapshotRecord(c, tok, ts, store.SnapshotReasonInitial)
	if err := c.Snapshots.SaveSnapshot(ctx, sn); err != nil {
		r.failWith("create the snapshot record", err)
		return position{}, false
	}
	r.snapshot, r.newSnap = sn.ID, &sn
	return position{token: tok, opTime: ts, source: store.SourceSnapshot}, true
}

// migrate looks for the stream's shared checkpoint (the one record per stream of earlier
// versions) when an instance has no checkpoint of its own, and takes it as the instance's
// starting point: it writes it as the instance's own checkpoint before the start, so that it is
// taken once, and never reads the shared one again. The shared record is left alone. A shared
// checkpoint not written for Checkpoint.Retention is ignored (an instance's own would have
// expired by then), so an instance added long after an upgrade starts per StartPosition. done
// is false when there is nothing to migrate.
func (c Config) migrate(ctx context.Context, r *resolveResult, base store.Checkpoint) (done bool) {
	shared, ok, err := c.Store.Load(ctx, store.Scope{Stream: c.Stream})
	if err != nil {
		r.failWith("load the shared checkpoint", err)
		return true
	}
	if !ok || (shared.Token == nil && shared.ClusterTime.IsZero()) {
		return false
	}
	now := c.Clock.Now()
	if age := now.Sub(shared.UpdatedAt); age > c.Checkpoint.Retention {
		r.ignoredShared = &shared
		return false
	}
	p := positionOf(shared)
	rec := base
	rec.Token, rec.ClusterTime, rec.Source = shared.Token, shared.ClusterTime, store.SourceMigrated
	if shared.Source == sourceInvalidate {
		rec.Source = sourceInvalidate // keeps it a startAfter position when loaded again
	}
	rec = c.stamp(rec, now)
	if !c.save(ctx, r, rec, "persist the migrated position") {
		return true
	}
	r.pos, r.cp, r.written, r.source, r.migrated = &p, &rec, true, store.SourceMigrated, &shared
	return true
}

// resolveJob loads the checkpoint, or captures and persists the start position. base carries
// the epoch, owner and settled count to write.
func (c *checkpointer) resolveJob(req uint64, mode policy.StartPosition, base store.Checkpoint) job {
	cfg, inst := c.cfg, c.inst
	return func(ctx context.Context) any {
		r := &resolveResult{inst: inst, req: req}
		cp, found, err := cfg.Store.Load(ctx, cfg.scope())
		if err != nil {
			r.failWith("load checkpoint", err)
			return r
		}
		found = found && (cp.Token != nil || !cp.ClusterTime.IsZero())
		var snap store.Snapshot
		var snapFound bool
		if cfg.Snapshots != nil {
			if snap, snapFound, err = cfg.Snapshots.LoadSnapshot(ctx, cfg.scope()); err != nil {
				r.failWith("load snapshot record", err)
				return r
			}
		}
		if snapFound && !snap.Finished() {
			// A snapshot was interrupted: it resumes before anything streams. Its record was
			// written before the checkpoint; a missing checkpoint is its handoff position.
			r.snapshot = snap.ID
			if found {
				p := positionOf(cp)
				r.pos, r.cp, r.source = &p, &cp, cp.Source
				return r
			}
			p := position{token: snap.HandoffToken, opTime: snap.HandoffTime, source: store.SourceSnapshot}
			return persistStart(ctx, *cfg, r, p, base, store.SourceSnapshot, false)
		}
		if !found && cfg.Instance != "" && policyx.StartKindOf(mode) == policyx.StartResume && cfg.migrate(ctx, r, base) {
			return r
		}
		if found {
			if policyx.StartKindOf(mode) == policyx.StartResume {
				if base.Epoch > 0 && cp.Epoch > base.Epoch {
					// A newer term wrote it: this one is deposed before it starts.
					r.fenced = fmt.Errorf("checkpointer: stream %q: start under epoch %d, stored epoch %d: %w",
						cfg.Stream, base.Epoch, cp.Epoch, store.ErrFenced)
					return r
				}
				if cp.Epoch < base.Epoch {
					// A new leadership epoch (SingleLeader): claim the position under it
					// before anything is consumed, so that every later write of an older
					// epoch (a deposed leader) is fenced.
					claimed := cp
					claimed.Epoch, claimed.Owner, claimed.UpdatedAt = base.Epoch, base.Owner, cfg.Clock.Now()
					if !cfg.save(ctx, r, claimed, "claim the checkpoint under the new epoch") {
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
		if !found && policyx.SnapshotEnabled(cfg.Snapshot) && policyx.StartKindOf(mode) != policyx.StartAt {
			// The first start: capture the handoff position, record the snapshot, then persist
			// the position, so that a crash in between never skips the snapshot.
			p, ok := cfg.beginSnapshot(ctx, r)
			if !ok {
				return r
			}
			return persistStart(ctx, *cfg, r, p, base, store.SourceSnapshot, policyx.StartKindOf(mode) != policyx.StartResume)
		}
		var p position
		switch policyx.StartKindOf(mode) {
		case policyx.StartAt:
			p = position{opTime: policyx.OperationTime(mode), source: store.SourceInitial}
			r.source = sourceAt
		default:
			tok, ts, ok := cfg.capture(ctx, r, "capture the current position")
			if !ok {
				return r
			}
			p = position{token: tok, opTime: ts, source: store.SourceInitial}
			r.source = store.SourceInitial
			if policyx.StartKindOf(mode) == policyx.StartLatest {
				r.source = sourceLatest
			}
		}
		return persistStart(ctx, *cfg, r, p, base, r.source, policyx.StartKindOf(mode) != policyx.StartResume)
	}
}

// persistStart writes p as the start checkpoint and completes r with it. A start position the
// configuration applies (applied: not a resume) replaces the stored one on purpose, even
// behind it: a Rewind.
func persistStart(ctx context.Context, cfg Config, r *resolveResult, p position, base store.Checkpoint, source string, applied bool) *resolveResult {
	rec := cfg.record(base, p)
	rec.Rewind = applied
	if !cfg.save(ctx, r, rec, "persist the start position") {
		return r
	}
	r.pos, r.cp, r.written, r.applied, r.source = &p, &rec, true, applied, source
	return r
}

// record is base at position p, stamped now: the checkpoint a start writes.
func (c Config) record(base store.Checkpoint, p position) store.Checkpoint {
	base.Token, base.ClusterTime, base.Source = p.token, p.opTime, p.source
	return c.stamp(base, c.Clock.Now())
}

// save writes rec for a start and reports whether it succeeded. A write refused by a newer
// epoch fences r; any other failure fails r at step.
func (c Config) save(ctx context.Context, r *resolveResult, rec store.Checkpoint, step string) bool {
	err := c.Store.Save(ctx, rec)
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrFenced):
		r.fenced = err
	default:
		r.failWith(step, err)
	}
	return false
}

// newSnapshotRecord is the record of a snapshot that starts now, from the handoff position
// (tok, ts). Its ID is unique per stream and time: it becomes part of every snapshot event's ID.
func newSnapshotRecord(cfg Config, tok bson.Raw, ts bson.Timestamp, reason string) store.Snapshot {
	now := cfg.Clock.Now()
	return store.Snapshot{Stream: cfg.Stream, Instance: cfg.Instance, ID: strconv.FormatInt(now.UnixNano(), 36), State: store.SnapshotRunning,
		Reason: reason, HandoffToken: tok, HandoffTime: ts, StartedAt: now, UpdatedAt: now}
}

// onHistoryLost applies OnHistoryLost to the start position the stream actor could not open.
func (c *checkpointer) onHistoryLost(ctx actor.Context, m *wire.HistoryLost) {
	inc := m.GetIncarnation()
	to, ok := c.admitStart(ctx, "HistoryLost", inc)
	if !ok {
		return
	}
	from := c.lastStart
	hl := c.cfg.OnHistoryLost
	reason := lossReason(m.GetCode(), m.GetMessage())
	c.log.Warn("change stream history lost", zap.Int32("code", m.GetCode()), zap.String("message", m.GetMessage()),
		zap.Stringer("policy", hl), zap.String("from_source", from.source))
	c.report(observe.HistoryLost{Meta: c.meta(), Policy: hl.String(),
		Err: historyLostError(c.cfg.Stream, m.GetCode(), m.GetMessage())})
	if policyx.HistoryLostKindOf(hl) == policyx.HistoryFail {
		terr := historyLostError(c.cfg.Stream, m.GetCode(), m.GetMessage())
		c.resolving = nil
		ctx.Send(to, &wire.StartFrom{Incarnation: inc, Kind: messages.StartKind_START_KIND_FAIL,
			Terminal: true, Reason: terr.Error()})
		c.log.Error("history lost under OnHistoryLost Fail: the stream fails terminally", zap.Error(terr))
		streamtree.Fail(ctx, terr)
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
		if from.empty() && !cfg.Checkpoint.Ephemeral {
			// The start position came from an earlier instance: the stored one is the best
			// knowledge of where the gap begins.
			if cp, ok, err := cfg.Store.Load(ctx, cfg.scope()); err == nil && ok {
				from = positionOf(cp)
			}
		}
		tok, ts, err := cfg.Positions.Current(ctx)
		if err != nil {
			r.failWith("capture the current position after history lost", err)
			return r
		}
		var p position
		var snap *store.Snapshot
		gapPolicy := store.GapResumeFromNow
		switch policyx.HistoryLostKindOf(hl) {
		case policyx.HistoryRebuildFromSnapshot:
			if len(tok) == 0 {
				r.fail = "capture the current position after history lost: empty resume token"
				return r
			}
			p = position{token: tok, opTime: ts, source: store.SourceSnapshot}
			gapPolicy = store.GapRebuildFromSnapshot
			sn := newSnapshotRecord(*cfg, tok, ts, store.SnapshotReasonRebuild)
			snap = &sn
		case policyx.HistoryRebuild:
			if ts.IsZero() {
				r.fail = "capture the current position after history lost: no operation time"
				return r
			}
			if err := policyx.RebuildFunc(hl)(ctx); err != nil {
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
		gap := store.Gap{ID: gapID(cfg.scope(), now, inc), Stream: cfg.Stream, Instance: cfg.Instance,
			FromToken: from.token, FromTime: from.opTime, ToToken: tok, ToTime: ts,
			Policy: gapPolicy, Reason: reason, At: now}
		if !cfg.retry(ctx, log, "gap record", func() error { return cfg.Gaps.RecordGap(ctx, gap) }) {
			return nil
		}
		r.gap = &gap
		if snap != nil {
			// The snapshot record first: a crash before the checkpoint is written then resumes
			// the snapshot from its own handoff position.
			if !cfg.retry(ctx, log, "snapshot record", func() error { return cfg.Snapshots.SaveSnapshot(ctx, *snap) }) {
				return nil
			}
			r.snapshot, r.newSnap = snap.ID, snap
		}
		r.pos, r.source = &p, p.source
		if cfg.Checkpoint.Ephemeral {
			return r // nothing is written: the new position lives in memory
		}
		rec := cfg.record(base, p)
		// The stored position cannot be resumed from (or is corrupt, and may sort anywhere):
		// the lost-history path replaces it on purpose.
		rec.Rewind = true
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

// retry calls write until it succeeds, waiting retryDelay between attempts: the history-lost
// path cannot move past a gap or snapshot record that is not durable. It is false when ctx
// ended first.
func (c Config) retry(ctx context.Context, log *zap.Logger, what string, write func() error) bool {
	for n := 1; ; n++ {
		err := write()
		if err == nil {
			return true
		}
		d := c.retryDelay(n)
		log.Warn(what+" write failed; retrying", zap.Error(err), zap.Int("attempt", n), zap.Duration("retry_in", d))
		if !treekit.Sleep(ctx, c.Clock, d) {
			return false
		}
	}
}

// gapID is a gap record's ID: "<stream>/<nanoseconds>/<incarnation>", with the instance after
// the stream for an AllInstances stream ("<stream>/<instance>/..."), so that two instances
// never write the same ID.
func gapID(scope store.Scope, at time.Time, inc uint64) string {
	if scope.Shared() {
		return fmt.Sprintf("%s/%d/%d", scope.Stream, at.UnixNano(), inc)
	}
	return fmt.Sprintf("%s/%s/%d/%d", scope.Stream, scope.Instance, at.UnixNano(), inc)
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
		c.report(observe.GapRecorded{Meta: c.meta(), From: g.FromToken, To: g.ToToken, Policy: c.cfg.OnHistoryLost.String()})
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
		ctx.Send(p.to, &wire.StartFrom{Incarnation: p.inc, Kind: messages.StartKind_START_KIND_FAIL, Reason: r.fail,
			Cause: errdetail.Of(r.failErr)})
		return
	}
	if m := r.migrated; m != nil {
		c.log.Info("no checkpoint of this instance: the stream's shared checkpoint of an earlier version is its starting point",
			zap.String("instance_name", c.cfg.Instance), zap.String("shared_source", m.Source), zap.Time("shared_at", m.UpdatedAt),
			zap.String("shared_owner", m.Owner))
	}
	if d := r.ignoredShared; d != nil {
		c.log.Warn("the stream's shared checkpoint of an earlier version is older than Checkpoint.Retention and is ignored: this instance starts per StartPosition",
			zap.String("instance_name", c.cfg.Instance), zap.Time("shared_at", d.UpdatedAt), zap.Duration("retention", c.cfg.Checkpoint.Retention))
	}
	if d := r.discarded; d != nil {
		c.log.Warn("saved checkpoint ignored by the start position", zap.Stringer("start_position", c.cfg.StartPosition),
			zap.String("saved_source", d.Source), zap.Time("saved_at", d.UpdatedAt))
	}
	if r.applied {
		c.sh.firstDone.Store(true)
	}
	if r.snapshot != "" {
		if r.newSnap != nil {
			c.log.Info("snapshot recorded; it runs before the stream streams", zap.String("snapshot", r.snapshot),
				zap.String("reason", r.newSnap.Reason))
		}
		c.snapPending = r.snapshot
	}
	c.t.setPosition(*r.pos)
	if r.cp != nil {
		c.persisted, c.persistedVersion = *r.pos, c.t.version
	}
	if r.written {
		cp := *r.cp
		c.report(observe.Checkpointed{Meta: c.meta(), Token: cp.Token})
		c.reportWrite(ctx, cp, true)
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
	sf := &wire.StartFrom{Incarnation: pend.inc, NextSeq: c.t.nextSeq(), Source: source, SnapshotId: c.snapPending}
	switch {
	case p.token != nil && p.startAfter:
		sf.Kind, sf.Token = messages.StartKind_START_KIND_START_AFTER, p.token
	case p.token != nil:
		sf.Kind, sf.Token = messages.StartKind_START_KIND_RESUME_AFTER, p.token
	case !p.opTime.IsZero():
		sf.Kind = messages.StartKind_START_KIND_START_AT_OPERATION_TIME
		sf.OperationTime = &wire.OperationTime{Seconds: p.opTime.T, Increment: p.opTime.I}
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

// onAdvanceHandoff moves a pending snapshot's handoff position forward (an idle change stream
// saw no event of the stream up to the new token) and persists it, so that a long snapshot's
// position does not age out of the oplog. Ignored unless the snapshot is the pending one and the
// position is still a handoff position (nothing was consumed from it).
func (c *checkpointer) onAdvanceHandoff(ctx actor.Context, m *wire.AdvanceHandoff) {
	if c.fenced || m.GetSnapshotId() == "" || m.GetSnapshotId() != c.snapPending || len(m.GetToken()) == 0 ||
		c.t.pos.source != store.SourceSnapshot {
		c.stale++
		c.log.Debug("AdvanceHandoff ignored", zap.String("snapshot", m.GetSnapshotId()), zap.String("pending", c.snapPending),
			zap.String("source", c.t.pos.source))
		return
	}
	c.log.Debug("snapshot handoff position moved forward", zap.String("snapshot", c.snapPending))
	c.t.setPosition(position{token: bson.Raw(m.GetToken()), source: store.SourceSnapshot})
	c.maybeSave(ctx, true)
}
