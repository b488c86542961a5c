package watchtree

import (
	"errors"
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/store"
)

// Actor names of a stream tree. The supervisor of stream "orders" on the runtime's own system
// is "watchtree-<n>/orders"; its children are ".../orders/checkpointer", ".../orders/dispatcher"
// and ".../orders/stream".
const (
	checkpointerName = "checkpointer"
	dispatcherName   = "dispatcher"
)

// Spawn validates spec and starts its stream tree: a supervisor (the RestartPolicy) with the
// checkpointer and the dispatcher as siblings and the stream actor as its restartable child.
// The stream starts at once; its handle reports and controls it.
//
// Validation is fail-fast and needs no server: the spec's own rules (Stream.Validate); a
// duplicate name (a *ConfigError on field Name matching ErrDuplicateStream); Mode SingleLeader,
// refused until the lease actor exists; and the database rules: a collection or cluster-wide
// stream needs a Database (its own, or Config.Database). The stores (checkpoints, dead letters,
// gaps) live in Config.Database, else in the stream's Database. The first Spawn that uses a store database or dead-letter collection creates its
// indexes (idempotent; a failure is logged, not returned: indexes serve retention and listing
// only). Spawn fails with ErrNotStarted before Start and ErrStopped after Stop.
func (rt *Runtime) Spawn(spec Spec) (*Handle, error) {
	e, err := rt.register(spec, true)
	if err != nil {
		return nil, err
	}
	e.opMu.Lock()
	err = e.spawnTree()
	e.opMu.Unlock()
	if err != nil {
		rt.unregister(e)
		return nil, err
	}
	e.log.Info("stream spawned", zap.Stringer("scope", e.cs.scope), zap.String("database", e.watcher.database),
		zap.String("collection", e.cs.collection), zap.Int("lanes", e.cs.lanes), zap.Stringer("mode", e.cs.mode))
	return e.handle, nil
}

// Props validates spec like Spawn and registers the stream on rt, but returns the props of its
// supervisor instead of spawning it, so that the tree runs under the user's own protoactor
// supervisor (spawn it in the runtime's actor system, Config.ActorSystem, exactly once; the
// name is the caller's choice).
//
// The user then owns the supervisor actor: its spawning, its parent's strategy (a restart of the
// supervisor rebuilds the whole tree from the stored checkpoint) and its stopping. The runtime
// still owns the stream's registration (the name stays taken on rt), its stores, its Observer
// events and its Handle (rt.Handle(name)): Handle.Stop stops the stream actor and flushes the
// checkpoint but leaves the supervisor actor to the user, and Runtime.Stop drains, flushes and
// stops the tree if it is still alive.
func Props(rt *Runtime, spec Spec) (*actor.Props, error) {
	e, err := rt.register(spec, false)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	props, err := e.treeProps(true)
	e.firstDone = true
	e.mu.Unlock()
	if err != nil {
		rt.unregister(e)
		return nil, err
	}
	return props.Clone(actor.WithReceiverMiddleware(e.trackPID)), nil
}

// register validates spec, resolves its databases and store, and adds it to the registry.
func (rt *Runtime) register(spec Spec, owned bool) (*streamEntry, error) {
	if spec == nil {
		return nil, &ConfigError{Field: "Spec", Rule: "must not be nil"}
	}
	cs, err := spec.compile()
	if err != nil {
		return nil, err
	}
	watchDB, storeDB, err := rt.databases(cs)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	switch rt.state {
	case rtNew:
		rt.mu.Unlock()
		return nil, ErrNotStarted
	case rtStopping, rtStopped:
		rt.mu.Unlock()
		return nil, ErrStopped
	}
	if _, dup := rt.streams[cs.name]; dup {
		rt.mu.Unlock()
		return nil, &ConfigError{Stream: cs.name, Field: "Name", Rule: "is already spawned on this runtime (stream names must be unique)",
			Err: ErrDuplicateStream, inStream: true}
	}
	st, err := rt.storeLocked(storeDB, cs.deadLetter.Collection)
	if err != nil {
		rt.mu.Unlock()
		return nil, err
	}
	e := newStreamEntry(rt, cs, st, watchDB, storeDB, owned)
	rt.streams[cs.name] = e
	rt.mu.Unlock()
	rt.ensureIndexes(st, storeKey{storeDB, cs.deadLetter.Collection})
	return e, nil
}

func (rt *Runtime) unregister(e *streamEntry) {
	rt.mu.Lock()
	if rt.streams[e.name] == e {
		delete(rt.streams, e.name)
	}
	rt.mu.Unlock()
}

// databases resolves the watched database and the store database of cs. It also rejects the
// SingleLeader mode, whose lease actor does not exist yet: running such a stream on every
// instance would break its promise of one consumer at a time.
func (rt *Runtime) databases(cs *compiledStream) (watchDB, storeDB string, err error) {
	if cs.mode == SingleLeader {
		return "", "", &ConfigError{Stream: cs.name, inStream: true, Field: "Mode",
			Rule: "SingleLeader is not available in this version (no lease actor yet); use AllInstances"}
	}
	watchDB = cs.database
	if cs.scope == scopeCollection && watchDB == "" {
		watchDB = rt.cfg.Database
	}
	if cs.scope == scopeCollection && watchDB == "" {
		return "", "", &ConfigError{Stream: cs.name, inStream: true, Field: "Database",
			Rule: "must be set when Config.Database is empty (the watched collection needs a database)"}
	}
	storeDB = rt.cfg.Database
	if storeDB == "" {
		storeDB = watchDB
	}
	if storeDB == "" {
		return "", "", &ConfigError{Stream: cs.name, inStream: true, Field: "Database",
			Rule: "must be set when Config.Database is empty (a cluster-wide stream's checkpoints need a database)"}
	}
	return watchDB, storeDB, nil
}

// treeProps builds the props of the stream's supervisor and its tree. first applies the
// stream's StartPosition (Latest, At); later trees resume from the checkpoint. e.mu is held.
func (e *streamEntry) treeProps(first bool) (*actor.Props, error) {
	cs, rt := e.cs, e.rt
	start := checkpointer.Resume
	if first {
		switch cs.start.kind {
		case startLatest:
			start = checkpointer.Latest
		case startAt:
			start = checkpointer.At(cs.start.at)
		}
	}
	hl := checkpointer.Fail
	switch cs.onHistoryLost.kind {
	case historyResumeFromNow:
		hl = checkpointer.ResumeFromNow
	case historyRebuild:
		hl = checkpointer.Rebuild(cs.onHistoryLost.rebuild)
	}
	cpProps, err := checkpointer.New(checkpointer.Config{
		Stream:           cs.name,
		Store:            e.store,
		Gaps:             e.store,
		Positions:        e.watcher,
		StartPosition:    start,
		OnHistoryLost:    hl,
		SaveEvery:        cs.checkpoint.SaveEvery,
		SaveInterval:     cs.checkpoint.SaveInterval,
		IdleSaveInterval: cs.checkpoint.IdleInterval,
		MaxUnflushed:     cs.checkpoint.MaxUnflushed,
		Owner:            rt.cfg.InstanceID,
		Clock:            rt.clk,
		Logger:           rt.log,
		Events:           checkpointerEvents{e},
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: checkpointer: %w", cs.name, err)
	}
	var dl dispatcher.DeadLetterWriter
	if !cs.deadLetter.Disabled {
		dl = e.store
	}
	dProps, err := dispatcher.New(dispatcher.Config{
		Stream: cs.name,
		Router: cs.router,
		Lanes:  cs.lanes,
		Retry: dispatcher.RetryPolicy{
			MaxAttempts:   cs.retry.MaxAttempts,
			InitialDelay:  cs.retry.InitialDelay,
			MaxDelay:      cs.retry.MaxDelay,
			Multiplier:    cs.retry.Multiplier,
			DisableJitter: cs.retry.DisableJitter,
		},
		DeadLetters:         dl,
		DeadLetterRetention: cs.deadLetter.Retention,
		AwaitSettleLimit:    true, // the checkpointer's settle limit bounds the unwritten settlements (MaxUnflushed)
		CheckpointerName:    checkpointerName,
		Clock:               rt.clk,
		Logger:              rt.log,
		Events:              dispatcherEvents{e},
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: dispatcher: %w", cs.name, err)
	}
	child, err := e.streamProps()
	if err != nil {
		return nil, err
	}
	props, err := supervisor.New(supervisor.Config{
		Stream: cs.name,
		Child:  child,
		// The checkpointer first: the dispatcher resolves it by name, and the reverse stop order
		// lets the dispatcher's last SettledBatch reach it.
		Siblings: []supervisor.Sibling{
			{Name: checkpointerName, Props: cpProps},
			{Name: dispatcherName, Props: dProps},
		},
		Policy: supervisor.Policy{
			MaxAttempts:  cs.restart.MaxAttempts,
			InitialDelay: cs.restart.InitialDelay,
			MaxDelay:     cs.restart.MaxDelay,
			Multiplier:   cs.restart.Multiplier,
			Jitter:       cs.restart.Jitter,
		},
		Classify:     classifyFailure,
		Clock:        rt.clk,
		Logger:       rt.log,
		OnTransition: e.onTransition,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: supervisor: %w", cs.name, err)
	}
	return props, nil
}

// terminalCauses maps the terminal sentinels of the actors to the root's: a failure wrapping the
// left one is terminal (the supervisor gives up at once) and is reported wrapping the right one,
// so users match the root sentinels with errors.Is.
var terminalCauses = []struct{ from, to error }{
	{ErrHistoryLost, ErrHistoryLost},
	{ErrInvalidated, ErrInvalidated},
	{ErrFenced, ErrFenced},
	{stream.ErrInvalidated, ErrInvalidated},
	{checkpointer.ErrHistoryLost, ErrHistoryLost},
	{checkpointer.ErrFenced, ErrFenced},
	{store.ErrFenced, ErrFenced},
}

// terminalCodes are server error codes that no restart can fix: Unauthorized (13),
// AuthenticationFailed (18), InvalidOptions (72), FailedToParse (9), InvalidNamespace (73),
// CommandNotSupportedOnView (166), APIStrictError (323).
var terminalCodes = []int{13, 18, 72, 9, 73, 166, 323}

// classifyFailure is the supervisors' Classifier: history lost under Fail, invalidate under
// InvalidateStop, fencing, authentication and configuration errors are terminal; everything else
// (network errors, not-primary, timeouts, cursor deaths, sibling failures) is transient.
func classifyFailure(reason any) (bool, error) {
	cause := supervisor.AsError(reason)
	for _, m := range terminalCauses {
		if errors.Is(cause, m.from) {
			if !errors.Is(cause, m.to) {
				cause = &terminalError{sentinel: m.to, cause: cause}
			}
			return true, cause
		}
	}
	if stream.PipelineModifiedID(cause) {
		// The user's Pipeline removes or changes the event's _id: no restart can fix it.
		return true, cause
	}
	var se mongo.ServerError
	if errors.As(cause, &se) {
		for _, code := range terminalCodes {
			if se.HasErrorCode(code) {
				return true, cause
			}
		}
	}
	return false, cause
}

// terminalError reports a terminal cause wrapped with the root sentinel it matches.
type terminalError struct {
	sentinel error
	cause    error
}

func (e *terminalError) Error() string {
	msg := e.cause.Error()
	if strings.Contains(msg, e.sentinel.Error()) {
		return msg
	}
	return e.sentinel.Error() + ": " + msg
}

func (e *terminalError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// dispatcherEvents maps the dispatcher's reports to Observer events. It runs on lane
// goroutines; safeObserver never blocks.
type dispatcherEvents struct{ e *streamEntry }

func (d dispatcherEvents) meta() Meta { return Meta{Stream: d.e.name, Time: d.e.rt.clk.Now()} }

func (d dispatcherEvents) RetryScheduled(r dispatcher.RetryScheduled) {
	d.e.rt.obs.OnEvent(RetryScheduled{Meta: d.meta(), EventID: r.ID, Attempt: r.Attempt, Delay: r.Delay, Err: r.Err})
}

func (d dispatcherEvents) DeadLettered(r dispatcher.DeadLettered) {
	d.e.rt.obs.OnEvent(DeadLettered{Meta: d.meta(), EventID: r.ID, OperationType: OperationType(r.OperationType),
		Attempts: r.Attempts, Err: r.Err, Dropped: r.Dropped})
}

func (d dispatcherEvents) DeadLetterFailed(r dispatcher.DeadLetterFailed) {
	d.e.rt.obs.OnEvent(DeadLetterFailed{Meta: d.meta(), EventID: r.ID, Err: r.Err})
}

// Skipped reports the reason given to Skip: the dispatcher passes the error's text, which ends
// with "watchtree: skipped: <reason>" (after any wrapping prefix).
func (d dispatcherEvents) Skipped(r dispatcher.EventSkipped) {
	reason := r.Reason
	if i := strings.LastIndex(reason, skipPrefix); i >= 0 {
		reason = reason[i+len(skipPrefix):]
	}
	d.e.rt.obs.OnEvent(Skipped{Meta: d.meta(), EventID: r.ID, Reason: reason})
}

// skipPrefix is what (*skipError).Error puts before the reason.
const skipPrefix = "watchtree: skipped: "

// HandlerPanicked is logged by the dispatcher and becomes a RetryScheduled or DeadLettered
// event; nothing more to report.
func (d dispatcherEvents) HandlerPanicked(dispatcher.HandlerPanicked) {}

func (d dispatcherEvents) Counted(c dispatcher.Counts) { d.e.setCounts(c) }

// checkpointerEvents maps the checkpointer's reports to Observer events, on its goroutine.
type checkpointerEvents struct{ e *streamEntry }

func (c checkpointerEvents) meta() Meta { return Meta{Stream: c.e.name, Time: c.e.rt.clk.Now()} }

func (c checkpointerEvents) HistoryLost(h checkpointer.HistoryLostEvent) {
	c.e.rt.obs.OnEvent(HistoryLost{Meta: c.meta(), Policy: c.e.cs.onHistoryLost,
		Err: fmt.Errorf("%w: server error %d: %s", ErrHistoryLost, h.Code, h.Message)})
}

func (c checkpointerEvents) GapRecorded(g store.Gap) {
	c.e.rt.obs.OnEvent(GapRecorded{Meta: c.meta(), From: g.FromToken, To: g.ToToken, Policy: c.e.cs.onHistoryLost})
}

func (c checkpointerEvents) Checkpointed(ev checkpointer.CheckpointedEvent) {
	c.e.setCheckpoint(ev.Checkpoint)
	c.e.rt.obs.OnEvent(Checkpointed{Meta: c.meta(), Token: ev.Checkpoint.Token, Settled: ev.Settled})
}

func (c checkpointerEvents) CheckpointFailed(ev checkpointer.CheckpointFailedEvent) {
	c.e.rt.obs.OnEvent(CheckpointFailed{Meta: c.meta(), Err: ev.Err, Unflushed: ev.Unflushed})
}

// Fenced is reported as the terminal Stopped{Crashed, ErrFenced} of the supervisor's give-up.
func (c checkpointerEvents) Fenced(err error) {
	c.e.log.Error("checkpoint write fenced: another instance owns the stream", zap.Error(err))
}

// streamProps builds the stream actor's props (the supervisor's restartable child).
func (e *streamEntry) streamProps() (*actor.Props, error) {
	props, err := stream.New(stream.Config{
		Stream:            e.cs.name,
		Watcher:           e.watcher,
		Checkpointer:      checkpointerName,
		Dispatcher:        dispatcherName,
		MaxAwaitTime:      e.watcher.maxAwait,
		InvalidateRestart: e.cs.onInvalidate == InvalidateRestart,
		TerminalErr:       ErrInvalidated,
		Clock:             e.rt.clk,
		Logger:            e.rt.log,
		Events:            streamEvents{e},
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: stream actor: %w", e.cs.name, err)
	}
	return props, nil
}

// streamEvents maps the stream actor's reports to Observer events, on its goroutine.
type streamEvents struct{ e *streamEntry }

func (s streamEvents) Opened(ev stream.OpenedEvent) {
	s.e.rt.obs.OnEvent(Started{Meta: Meta{Stream: s.e.name, Time: ev.At}, Position: startedPosition(ev.Source)})
}

func (s streamEvents) Invalidated(ev stream.InvalidatedEvent) {
	action := InvalidateStop
	if ev.Restart {
		action = InvalidateRestart
	}
	cause := OperationType(ev.Cause)
	if cause == "" {
		cause = s.e.watcher.invalidateCause()
	}
	s.e.rt.obs.OnEvent(Invalidated{Meta: Meta{Stream: s.e.name, Time: ev.At}, Cause: cause, Action: action})
}

// CursorFailed is reported as the supervisor's Stopped{Crashed} that follows.
func (s streamEvents) CursorFailed(stream.CursorFailedEvent) {}
