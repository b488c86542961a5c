package watchtree

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

// StreamState is the lifecycle state of a stream, as its supervisor reports it.
type StreamState string

// The states of a stream (design §2).
const (
	// StateStarting: the stream actor is (re)starting; its cursor is not open yet.
	StateStarting StreamState = "starting"
	// StateStandby: waiting for leadership (SingleLeader); consumes nothing.
	StateStandby StreamState = "standby"
	// StateRunning: the cursor is open and events flow.
	StateRunning StreamState = "running"
	// StateBackoff: the stream died; a restart is scheduled (NextRetryAt).
	StateBackoff StreamState = "backoff"
	// StateStopped: stopped by an operator (Handle.Stop) or by Runtime.Stop.
	StateStopped StreamState = "stopped"
	// StateCrashed: terminal failure or restart attempts exhausted; down until Handle.Start.
	StateCrashed StreamState = "crashed"
)

// StreamStatus is a snapshot of one stream.
type StreamStatus struct {
	// Name is the stream's Name.
	Name string
	// State is the lifecycle state; Why the one-line reason of the latest transition; Since when
	// it was entered.
	State StreamState
	Why   string
	Since time.Time
	// Attempt counts deaths since the last successful resubscription; MaxAttempts is the
	// RestartPolicy limit (0: unlimited). NextRetryAt is when the pending restart fires (zero
	// outside backoff).
	Attempt, MaxAttempts uint32
	NextRetryAt          time.Time
	// LastCause is the error of the latest death ("" if none).
	LastCause string
	// Incarnation numbers the stream actor's (re)starts within the current tree, from 1.
	Incarnation uint64
	// Deaths and Restarts count deaths of the stream actor and restarts carried out by the
	// RestartPolicy, within the current tree.
	Deaths, Restarts uint64
	// Checkpoint is the resume token of the latest checkpoint written by this runtime (nil when
	// none was written yet), CheckpointSource its Checkpoint.Source ("event", "pbrt", "initial",
	// ...) and CheckpointAt when it was written; time.Since(CheckpointAt) is the checkpoint age.
	Checkpoint       bson.Raw
	CheckpointSource string
	CheckpointAt     time.Time
	// Settled counts the events settled by the dispatcher of the current tree, by outcome:
	// Handled + Filtered + Unhandled + Skipped + DeadLettered = Settled. Updated once per
	// settlement batch, so it may lag by at most one batch (≤ 256 events or 50ms).
	Settled, Handled, Filtered, Unhandled, Skipped, DeadLettered uint64
}

// Handle controls one spawned stream. It is safe for concurrent use.
type Handle struct{ e *streamEntry }

// Name returns the stream's Name.
func (h *Handle) Name() string { return h.e.name }

// Status asks the stream's supervisor for its current status (one actor round trip, bounded
// by ctx; 5s when ctx has no deadline). A stream whose tree is not running (stopped by
// Handle.Stop or Runtime.Stop) answers from the runtime's cache.
func (h *Handle) Status(ctx context.Context) (StreamStatus, error) { return h.e.status(ctx) }

// Stop stops the stream gracefully and waits, bounded by ctx and Config.ShutdownTimeout (the
// earlier): the dispatcher drains (in-flight
// events finish and settle; later ones are left for the next start), the checkpointer writes
// the final position, and the stream's actors stop. The stream stays registered (its name stays
// taken) in state stopped; Start brings it back from its checkpoint. Stopping a stopped stream
// returns nil.
//
// For a stream spawned through Props the user owns the supervisor actor: Stop then stops only
// the stream actor (supervisor state stopped), and flushes the checkpoint; events already
// handed to the dispatcher still finish in the background.
func (h *Handle) Stop(ctx context.Context) error { return h.e.stop(ctx, "operator stop") }

// Start starts a stopped or crashed stream: it resumes after its checkpoint (Latest and At
// start positions apply to the first start after Spawn only). Starting a stream that is up
// (starting, running, backoff) is a no-op, except that during backoff the pending restart
// happens now (an operator start wins over the RestartPolicy's delay) and the attempt counter
// resets.
func (h *Handle) Start(ctx context.Context) error { return h.e.start(ctx, false) }

// Restart restarts the stream actor now (a new cursor from the checkpointer's latest position)
// and resets the attempt counter; a stopped stream is started.
func (h *Handle) Restart(ctx context.Context) error { return h.e.start(ctx, true) }

// streamEntry is the runtime's record of one stream: its compiled spec, stores, the supervisor
// PID while its tree runs, and the status cache fed by the tree's callbacks.
type streamEntry struct {
	rt      *Runtime
	name    string
	cs      *compiledStream
	log     *zap.Logger
	store   *storeSet
	watcher *driverWatcher
	owned   bool // spawned by Spawn; false: Props (the user owns the supervisor actor)
	handle  *Handle

	// shuttingDown is set while stop/shutdown runs: the supervisor's transition to stopped is
	// then not reported, the Stopped{Graceful} event follows the final flush instead.
	shuttingDown atomic.Bool

	opMu sync.Mutex // serialises stop/start/restart/shutdown

	mu        sync.Mutex
	pid       *actor.PID // the supervisor, nil while the tree is not running
	closed    bool       // runtime stopping: never spawn the tree again
	firstDone bool       // the tree was spawned once (Latest/At applied)
	st        StreamStatus
	lastCause error // the latest death's cause, as reported
}

func newStreamEntry(rt *Runtime, cs *compiledStream, st *storeSet, watchDB, storeDB string, owned bool) *streamEntry {
	e := &streamEntry{
		rt:      rt,
		name:    cs.name,
		cs:      cs,
		log:     streamLogger(rt.log, cs.name),
		store:   st,
		watcher: newDriverWatcher(cs, rt.cfg.Client, watchDB),
		owned:   owned,
	}
	e.watcher.excludeStores(storeDB, cs.deadLetter.Collection)
	e.handle = &Handle{e: e}
	e.st = StreamStatus{Name: cs.name, State: StateStarting, Why: "spawned", Since: rt.clk.Now(),
		MaxAttempts: uint32(cs.restart.MaxAttempts)}
	return e
}

// supervisorPID returns the supervisor's PID, or nil.
func (e *streamEntry) supervisorPID() *actor.PID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid
}

// siblingPID returns the PID of a sibling ("checkpointer", "dispatcher") under sup.
func siblingPID(sup *actor.PID, name string) *actor.PID {
	return actor.NewPID(sup.Address, sup.Id+"/"+name)
}

// cachedStatus returns the status cache.
func (e *streamEntry) cachedStatus() StreamStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.st
	st.Checkpoint = append(bson.Raw(nil), e.st.Checkpoint...)
	if len(st.Checkpoint) == 0 {
		st.Checkpoint = nil
	}
	return st
}

func (e *streamEntry) status(ctx context.Context) (StreamStatus, error) {
	sys, err := e.rt.system()
	pid := e.supervisorPID()
	if err != nil || pid == nil {
		return e.cachedStatus(), nil
	}
	res, err := request(ctx, sys, pid, &messages.StatusRequest{})
	if err != nil {
		if errors.Is(err, actor.ErrDeadLetter) { // the tree stopped meanwhile
			return e.cachedStatus(), nil
		}
		return StreamStatus{}, fmt.Errorf("watchtree: stream %q: status: %w", e.name, err)
	}
	r, ok := res.(*messages.StatusReply)
	if !ok {
		return StreamStatus{}, fmt.Errorf("watchtree: stream %q: status: unexpected reply %T", e.name, res)
	}
	st := e.cachedStatus()
	st.State = StreamState(supervisor.StateFromProto(r.GetState()).String())
	st.Why = r.GetWhy()
	st.Since = r.GetSince().AsTime()
	st.Attempt = r.GetAttempt()
	st.MaxAttempts = r.GetMaxAttempts()
	st.NextRetryAt = time.Time{}
	if r.GetNextRetryAt() != nil {
		st.NextRetryAt = r.GetNextRetryAt().AsTime()
	}
	st.LastCause = r.GetLastCause()
	st.Incarnation = r.GetIncarnation()
	st.Deaths = r.GetDeaths()
	st.Restarts = r.GetRestarts()
	return st, nil
}

// onTransition runs on the supervisor's goroutine: it updates the cache and reports the
// transition to the Observer (never blocking: safeObserver queues).
func (e *streamEntry) onTransition(t supervisor.Transition) {
	cause := t.Cause
	if t.To == supervisor.StateCrashed && cause != nil && isGiveUp(t) && !errors.Is(cause, ErrGaveUp) {
		cause = &terminalError{sentinel: ErrGaveUp, cause: cause}
	}
	e.mu.Lock()
	e.st.State = StreamState(t.To.String())
	e.st.Why = t.Why
	e.st.Since = t.At
	e.st.Attempt = uint32(t.Attempt)
	e.st.MaxAttempts = uint32(t.MaxAttempts)
	e.st.Incarnation = t.Incarnation
	e.st.NextRetryAt = time.Time{}
	switch t.To {
	case supervisor.StateBackoff:
		e.st.NextRetryAt = t.At.Add(t.Delay)
		e.st.Deaths++
	case supervisor.StateCrashed:
		if t.Cause != nil {
			e.st.Deaths++
		}
	case supervisor.StateRunning:
		e.st.Attempt = 0
		if t.Attempt > 0 {
			e.st.Restarts++
		}
	}
	if cause != nil {
		e.st.LastCause = cause.Error()
		e.lastCause = cause
	}
	e.mu.Unlock()

	obs := e.rt.obs
	meta := Meta{Stream: e.name, Time: t.At}
	switch t.To {
	case supervisor.StateRunning: // Started comes from the stream actor (streamEvents.Opened)
		if t.Attempt > 0 {
			obs.OnEvent(Restarted{Meta: meta, Attempt: t.Attempt, Cause: t.Cause})
		}
	case supervisor.StateBackoff:
		obs.OnEvent(Stopped{Meta: meta, Reason: Crashed, Cause: cause})
	case supervisor.StateCrashed:
		obs.OnEvent(Stopped{Meta: meta, Reason: Crashed, Cause: cause, Terminal: true})
	case supervisor.StateStopped:
		if !e.shuttingDown.Load() {
			obs.OnEvent(Stopped{Meta: meta, Reason: Graceful})
		}
	}
}

// isGiveUp tells a give-up (attempts exhausted) from a terminal error; the supervisor's why line
// is the only place that says which.
func isGiveUp(t supervisor.Transition) bool {
	return t.MaxAttempts > 0 && t.Attempt > t.MaxAttempts
}

// startedPosition maps the source of the position a cursor opened at (StartFrom.source) to
// Started.Position: a stored checkpoint or the checkpointer's in-memory position is "checkpoint".
func startedPosition(source string) string {
	switch source {
	case store.SourceInitial:
		return "initial"
	case store.SourceResumeFromNow, store.SourceRebuild:
		return "after-gap"
	case "latest":
		return "latest"
	case "at":
		return "at"
	case "invalidate":
		return "after-invalidate"
	}
	return "checkpoint"
}

// setCounts records the dispatcher's counters (from dispatcher.Events.Counted).
func (e *streamEntry) setCounts(c dispatcher.Counts) {
	e.mu.Lock()
	e.st.Settled, e.st.Handled, e.st.Filtered = c.Settled, c.Handled, c.Filtered
	e.st.Unhandled, e.st.Skipped, e.st.DeadLettered = c.Unhandled, c.Skipped, c.DeadLettered+c.Dropped
	e.mu.Unlock()
}

// setCheckpoint records a checkpoint write (from checkpointer.Events.Checkpointed).
func (e *streamEntry) setCheckpoint(cp store.Checkpoint) {
	e.mu.Lock()
	e.st.Checkpoint = append(e.st.Checkpoint[:0], cp.Token...)
	e.st.CheckpointSource = cp.Source
	e.st.CheckpointAt = cp.UpdatedAt
	e.mu.Unlock()
}

// spawnTree spawns the stream's tree under the actor system's root. The first spawn applies the
// stream's StartPosition; later spawns (after Handle.Stop) resume from the checkpoint. e.opMu
// must be held (so a concurrent shutdown either sees the new PID or prevents the spawn); e.mu is
// not held while spawning, since the supervisor reports its first transitions under it.
func (e *streamEntry) spawnTree() error {
	sys, err := e.rt.system()
	if err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrStopped
	}
	if e.pid != nil {
		e.mu.Unlock()
		return nil
	}
	props, err := e.treeProps(!e.firstDone)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	pid, err := sys.Root.SpawnNamed(props, e.rt.prefix+"/"+e.name)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: spawn: %w", e.name, err)
	}
	e.mu.Lock()
	e.firstDone = true
	e.pid = pid
	e.mu.Unlock()
	return nil
}

// trackPID is the receiver middleware of a Props-built supervisor: it records the supervisor's
// PID while the actor lives, so Handle, Stop and Status reach a tree the user spawned.
func (e *streamEntry) trackPID(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
		switch env.Message.(type) {
		case *actor.Started:
			e.mu.Lock()
			e.pid = ctx.Self()
			e.mu.Unlock()
		case *actor.Stopped:
			e.mu.Lock()
			if e.pid != nil && e.pid.Equal(ctx.Self()) {
				e.pid = nil
			}
			e.mu.Unlock()
		}
		next(ctx, env)
	}
}

// stop is Handle.Stop.
func (e *streamEntry) stop(ctx context.Context, why string) error {
	if _, err := e.rt.system(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.rt.cfg.ShutdownTimeout)
	defer cancel()
	if !e.owned {
		return e.stopUserOwned(ctx, why)
	}
	return e.shutdown(ctx, why, false)
}

// shutdown stops the tree gracefully: stream actor stopped (supervisor Stop), dispatcher
// drained, checkpointer flushed, supervisor stopped; each step bounded by ctx. Used by
// Handle.Stop and Runtime.Stop (closing: the entry is marked closed, never spawned again).
func (e *streamEntry) shutdown(ctx context.Context, why string, closing bool) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	e.mu.Lock()
	if closing {
		e.closed = true
	}
	pid := e.pid
	wasCrashed := e.st.State == StateCrashed
	// A sibling (checkpointer, dispatcher) that failed stays suspended during the backoff that
	// follows (the supervisor resumes it only once the tree is crashed) and would answer neither
	// Drain nor Flush: skip both and only stop the tree.
	siblingDown := e.st.State == StateBackoff && errors.Is(e.lastCause, supervisor.ErrSiblingFailed)
	e.mu.Unlock()
	if pid == nil {
		return nil
	}
	sys := e.rt.sys
	e.shuttingDown.Store(true)
	defer e.shuttingDown.Store(false)
	start := time.Now()

	var errs []error
	// 1. Stop the stream actor: no more batches, the cursor is closed.
	if _, err := request(ctx, sys, pid, &messages.Stop{Reason: why}); err != nil {
		errs = append(errs, fmt.Errorf("stop the stream actor: %w", err))
	}
	// 2. Drain the dispatcher: every accepted event settles, the last SettledBatch is sent.
	var drained *messages.Drained
	if siblingDown {
		e.log.Warn("a sibling actor failed: stopping without drain and flush; events since the last checkpoint are redelivered")
	} else if res, err := request(ctx, sys, siblingPID(pid, dispatcherName), &messages.Drain{TimeoutMs: drainBudgetMs(ctx)}); err != nil {
		errs = append(errs, fmt.Errorf("drain the dispatcher: %w", err))
	} else if d, ok := res.(*messages.Drained); ok {
		drained = d
		if d.GetTimedOut() {
			errs = append(errs, fmt.Errorf("drain the dispatcher: %w (%d events unsettled, redelivered on the next start)",
				context.DeadlineExceeded, d.GetUnsettled()))
		}
	}
	// 3. Flush the checkpointer: the final position (after the last settled event) is written.
	var flushed *messages.Flushed
	if !siblingDown {
		if res, err := request(ctx, sys, siblingPID(pid, checkpointerName), &messages.Flush{}); err != nil {
			errs = append(errs, fmt.Errorf("flush the checkpoint: %w", err))
		} else if f, ok := res.(*messages.Flushed); ok {
			flushed = f
			switch {
			case f.GetFenced():
				// Another instance owns the stream; it already crashed with ErrFenced.
				e.log.Warn("final checkpoint not written: fenced by a newer epoch")
			case f.GetError() != "":
				errs = append(errs, fmt.Errorf("flush the checkpoint: %s", f.GetError()))
			}
		}
	}
	// 4. Stop the supervisor and its children (protoactor stops them in reverse spawn order).
	if err := stopActor(ctx, sys, pid); err != nil {
		errs = append(errs, fmt.Errorf("stop the supervisor: %w", err))
	}
	e.mu.Lock()
	if e.pid != nil && e.pid.Equal(pid) {
		e.pid = nil
	}
	now := e.rt.clk.Now()
	e.st.State, e.st.Why, e.st.Since, e.st.NextRetryAt = StateStopped, why, now, time.Time{}
	e.mu.Unlock()

	fields := []zap.Field{zap.String("why", why), zap.Duration("took", time.Since(start))}
	if drained != nil {
		fields = append(fields, zap.Uint64("settled", drained.GetSettled()), zap.Uint64("unsettled", drained.GetUnsettled()))
	}
	if flushed != nil {
		fields = append(fields, zap.Uint64("low_water_mark", flushed.GetLowWaterMark()))
	}
	err := errors.Join(errs...)
	if err != nil {
		e.log.Warn("stream stopped with errors", append(fields, zap.Error(err))...)
	} else {
		e.log.Info("stream stopped", fields...)
	}
	if !wasCrashed { // a crashed stream already reported its (terminal) Stopped
		e.rt.obs.OnEvent(Stopped{Meta: Meta{Stream: e.name, Time: now}, Reason: Graceful}) // a cut-short stop is in Stop's error and the log
	}
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: %w", e.name, err)
	}
	return nil
}

// stopUserOwned stops the stream actor of a Props-spawned tree and flushes its checkpoint; the
// supervisor actor stays (the user owns it).
func (e *streamEntry) stopUserOwned(ctx context.Context, why string) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	pid := e.supervisorPID()
	if pid == nil {
		return nil
	}
	sys := e.rt.sys
	if _, err := request(ctx, sys, pid, &messages.Stop{Reason: why}); err != nil {
		return fmt.Errorf("watchtree: stream %q: stop: %w", e.name, err)
	}
	res, err := request(ctx, sys, siblingPID(pid, checkpointerName), &messages.Flush{})
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: flush the checkpoint: %w", e.name, err)
	}
	if f, ok := res.(*messages.Flushed); ok && f.GetError() != "" {
		return fmt.Errorf("watchtree: stream %q: flush the checkpoint: %s", e.name, f.GetError())
	}
	return nil
}

// start is Handle.Start (restart=false) and Handle.Restart.
func (e *streamEntry) start(ctx context.Context, restart bool) error {
	sys, err := e.rt.system()
	if err != nil {
		return err
	}
	e.opMu.Lock()
	defer e.opMu.Unlock()
	pid := e.supervisorPID()
	if pid == nil {
		if !e.owned {
			return fmt.Errorf("watchtree: stream %q: its supervisor (spawned through Props) is not running: %w", e.name, ErrStopped)
		}
		return e.spawnTree()
	}
	var msg any = &messages.Start{Reason: "handle"}
	if restart {
		msg = &messages.Restart{Reason: "handle"}
	}
	if _, err := request(ctx, sys, pid, msg); err != nil {
		return fmt.Errorf("watchtree: stream %q: %w", e.name, err)
	}
	return nil
}

// defaultRequestTimeout bounds an actor request when ctx has no deadline.
const defaultRequestTimeout = 5 * time.Second

// request sends msg to pid and waits for the reply, bounded by ctx (defaultRequestTimeout
// without a deadline). It runs on the caller's goroutine, never on an actor's.
func request(ctx context.Context, sys *actor.ActorSystem, pid *actor.PID, msg any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := defaultRequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	res, err := sys.Root.RequestFuture(pid, msg, timeout).Result()
	if errors.Is(err, actor.ErrTimeout) {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("%w after %v", context.DeadlineExceeded, timeout)
	}
	return res, err
}

// stopActor stops pid and waits until it (and its children) stopped, bounded by ctx.
func stopActor(ctx context.Context, sys *actor.ActorSystem, pid *actor.PID) error {
	fut := sys.Root.StopFuture(pid) // protoactor's own 10s bound
	done := make(chan error, 1)
	go func() { done <- fut.Wait() }()
	select {
	case err := <-done:
		if errors.Is(err, actor.ErrDeadLetter) {
			return nil // already gone
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drainBudgetMs returns the dispatcher's drain timeout: three quarters of the time left before
// ctx's deadline, so the final flush and the stop still fit (0 without a deadline: the
// dispatcher's own default, 30s, applies).
func drainBudgetMs(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(dl).Milliseconds()*3/4, 1)
}
