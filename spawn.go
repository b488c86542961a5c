package watchtree

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/store"
)

// Actor names of a stream tree. The supervisor of stream "orders" on the runtime's own system
// is "watchtree-<n>/orders"; its children are ".../orders/checkpointer", ".../orders/dispatcher"
// and ".../orders/stream".
const (
	checkpointerName = "checkpointer"
	dispatcherName   = "dispatcher"
	snapshotName     = "snapshot"
)

// snapshotReadTimeout is the least time a snapshot's store and read calls get (a chunk of
// BatchSize documents, or the planning queries on a large collection, take longer than a
// connection).
const snapshotReadTimeout = time.Minute

// snapshotStore is the stream's snapshot store when the stream can run a snapshot, else nil
// (the checkpointer then never looks for a snapshot record).
func (e *streamEntry) snapshotStore() store.SnapshotStore {
	switch {
	case !e.cs.Snapshots():
		return nil
	case e.memSnapshots != nil: // Ephemeral: nothing is stored
		return e.memSnapshots
	case e.store.Snapshots == nil:
		return nil
	}
	return e.store.Snapshots
}

// Spawn validates spec, starts its stream tree and waits until the stream's change stream is
// open: when Spawn returns without error, the stream's start position is fixed, and every write
// committed after that is delivered to the handlers (with the default Resume and no checkpoint,
// and with Latest, the position captured at the start is persisted before the cursor opens). A
// stream that copies its collection first (Stream.Snapshot) returns once the snapshot's handoff
// position is persisted, in state snapshotting: the copy then runs, and every write committed
// after Spawn returned is delivered after it.
//
// The tree is a supervisor (the RestartPolicy) with the checkpointer and the dispatcher as
// siblings and the stream actor as its restartable child; the handle reports and controls it.
// A SingleLeader stream's tree also has a leader actor, and Spawn returns once the stream runs
// (this instance acquired the lease) or is in standby (another instance holds it): a standby's
// start position is fixed when it acquires the lease, from the stream's shared checkpoint.
//
// Validation is fail-fast and needs no server: the spec's own rules (Stream.Validate); a
// duplicate name (a *ConfigError on field Name matching ErrDuplicateStream); and the database rules: a collection or cluster-wide
// stream needs a Database (its own, or Config.Database). The stores (checkpoints, dead letters,
// gaps) live in Config.Database, else in the stream's Database, unless Config sets them. The
// first Spawn that uses a store database or dead-letter collection has its indexes created in
// the background: Spawn never waits for them, Stop cancels them, and a failure is logged, not
// returned, and retried by the next Spawn that uses the store (indexes serve retention and
// listing only).
//
// The wait is bounded by ctx (30s when ctx has no deadline). A start that fails with an error
// no restart can fix (a pipeline with an unknown stage, a bad namespace, authentication) returns
// at once with the server's error; a transient failure is retried by the RestartPolicy until ctx
// ends, and the error then names the last cause. In both cases nothing stays registered: the
// tree is stopped and the name is free again. Spawn fails with ErrNotStarted before Start and
// ErrStopped after Stop.
func (rt *Runtime) Spawn(ctx context.Context, spec Spec) (*Handle, error) {
	e, err := rt.register(spec, true)
	if err != nil {
		return nil, err
	}
	if err := e.spawnTree(); err != nil {
		rt.unregister(e)
		return nil, err
	}
	if err := e.awaitRunning(ctx); err != nil {
		e.abandon()
		return nil, err
	}
	e.log.Info("stream spawned", zap.Stringer("scope", e.cs.Scope()), zap.String("database", e.watcher.Database),
		zap.String("collection", e.cs.Collection), zap.Int("lanes", e.cs.Lanes), zap.String("mode", e.cs.Mode()))
	return e.handle, nil
}

// Props validates spec like Spawn and registers the stream on rt, but returns the props of its
// supervisor instead of spawning it, so that the tree runs under the user's own protoactor
// supervisor (spawn it in the runtime's actor system, Config.ActorSystem, exactly once; the
// name is the caller's choice).
//
// The user then owns the supervisor actor: its spawning and its parent's strategy (a restart of
// the supervisor rebuilds the whole tree from the stored checkpoint). The tree speaks the same
// protocol as one spawned by Spawn: Handle.Stop, or a graceful Stop message from the user's own
// actor, drains the dispatcher and flushes the checkpoint. The runtime owns the stream's
// registration (the name stays taken on rt), its stores, its Observer events and its Handle
// (rt.Handle(name)); Runtime.Stop stops the tree gracefully and then stops the supervisor actor,
// since the tree cannot outlive the runtime's stores.
func Props(rt *Runtime, spec Spec) (*actor.Props, error) {
	e, err := rt.register(spec, false)
	if err != nil {
		return nil, err
	}
	props, err := e.treeProps()
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
	if _, dup := rt.streams[cs.Name]; dup {
		rt.mu.Unlock()
		return nil, &ConfigError{Stream: cs.Name, Field: "Name", Rule: "is already spawned on this runtime (stream names must be unique)",
			Err: ErrDuplicateStream}
	}
	st, err := rt.stores.Get(storeDB, cs.DeadLetter.Collection)
	if err != nil {
		rt.mu.Unlock()
		return nil, err
	}
	if cs.Snapshots() && !cs.Checkpoint.Ephemeral && st.Snapshots == nil {
		rt.mu.Unlock()
		return nil, &ConfigError{Stream: cs.Name, Field: "Config.Snapshots",
			Rule: "must be set for a stream that snapshots (Snapshot.Mode, or OnHistoryLost RebuildFromSnapshot) when Config.Checkpoints is set: the snapshot records go with the checkpoints, so the default MongoDB store serves only the default checkpoints"}
	}
	e := newStreamEntry(rt, cs, st, watchDB, storeDB, owned)
	rt.streams[cs.Name] = e
	rt.mu.Unlock()
	rt.stores.CreateIndexesLater(st)
	return e, nil
}

func (rt *Runtime) unregister(e *streamEntry) {
	rt.mu.Lock()
	if rt.streams[e.name] == e {
		delete(rt.streams, e.name)
		if rt.bal != nil {
			rt.bal.Remove(e.name)
		}
	}
	rt.mu.Unlock()
}

// databases resolves the watched database and the store database of cs (empty when Config
// sets every store cs uses and cs names none), and rejects a DeadLetterPolicy.Collection that
// Config.DeadLetters would ignore.
func (rt *Runtime) databases(cs *engine.Spec) (watchDB, storeDB string, err error) {
	watchDB = cs.Database
	if cs.Scope() == engine.ScopeCollection && watchDB == "" {
		watchDB = rt.cfg.Database
	}
	if cs.Scope() == engine.ScopeCollection && watchDB == "" {
		return "", "", &ConfigError{Stream: cs.Name, Field: "Database",
			Rule: "must be set when Config.Database is empty (the watched collection needs a database)"}
	}
	if rt.cfg.DeadLetters != nil && cs.DeadLetter.Collection != defaultDeadLetterColl {
		// The collection would be silently ignored: Config.DeadLetters serves every stream.
		return "", "", &ConfigError{Stream: cs.Name, Field: "DeadLetter.Collection",
			Rule: fmt.Sprintf("must be empty when Config.DeadLetters is set, got %q", cs.DeadLetter.Collection)}
	}
	storeDB = rt.cfg.Database
	if storeDB == "" {
		storeDB = watchDB
	}
	if field := rt.cfg.stores().NeedsDatabase(cs); storeDB == "" && field != "" {
		return "", "", &ConfigError{Stream: cs.Name, Field: "Database",
			Rule: fmt.Sprintf("must be set when Config.Database is empty (a cluster-wide stream's default stores need a database: Config.%s is nil)", field)}
	}
	return watchDB, storeDB, nil
}

// treeProps builds the props of the stream's supervisor and its tree. The StartPosition (Latest,
// At) applies to the first start of the tree only: the checkpointer's instances share that
// memory, so later starts, and a tree rebuilt by a user's parent, resume from the checkpoint.
func (e *streamEntry) treeProps() (*actor.Props, error) {
	cs, rt := e.cs, e.rt
	start := cs.Start
	var leases store.LeaseStore
	if cs.SingleLeader {
		leases = e.store.Leases // set: databases made sure the default has a database
	}
	cpProps, err := checkpointer.New(checkpointer.Config{
		Stream:        cs.Name,
		Instance:      e.records.Instance,
		Store:         e.store.Checkpoints,
		Gaps:          e.store.Gaps,
		Positions:     e.watcher,
		StartPosition: start,
		OnHistoryLost: cs.OnHistoryLost,
		Snapshot:      cs.Snapshot,
		Snapshots:     e.snapshotStore(),
		Checkpoint:    cs.Checkpoint,
		IOTimeout:     rt.cfg.ConnectTimeout,
		Owner:         rt.cfg.InstanceID,
		Epoch:         e.epoch.Load,
		Clock:         rt.clk,
		Logger:        rt.log,
		Observer:      rt.obs,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: checkpointer: %w", cs.Name, err)
	}
	var dl dispatcher.DeadLetterWriter
	if !cs.DeadLetter.Disabled {
		dl = e.store.DeadLetters
		if leases != nil {
			dl = engine.FencedDeadLetters{DeadLetterStore: e.store.DeadLetters, Leases: leases, Stream: e.name,
				Owner: rt.cfg.InstanceID, Epoch: e.epoch.Load, Fence: e.fence}
		}
	}
	dProps, err := dispatcher.New(dispatcher.Config{
		Stream:              cs.Name,
		Instance:            e.records.Instance,
		Router:              e.routerFor(),
		Lanes:               cs.Lanes,
		Retry:               cs.Retry,
		DeadLetters:         dl,
		DeadLetterRetention: cs.DeadLetter.Retention,
		AwaitSettleLimit:    true, // the checkpointer's settle limit bounds the unwritten settlements (MaxUnflushed)
		CheckpointerName:    checkpointerName,
		Clock:               rt.clk,
		Logger:              rt.log,
		Observer:            rt.obs,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: dispatcher: %w", cs.Name, err)
	}
	child, err := e.streamProps()
	if err != nil {
		return nil, err
	}
	// The checkpointer first: the dispatcher resolves it by name, and the reverse stop order
	// lets the dispatcher's last SettledBatch reach it. The snapshot actor last: it stops first.
	siblings := []supervisor.Sibling{
		{Name: checkpointerName, Props: cpProps},
		{Name: dispatcherName, Props: dProps},
	}
	if cs.Snapshots() {
		sProps, err := snapshot.New(snapshot.Config{
			Stream:     cs.Name,
			Instance:   e.records.Instance,
			Database:   e.watcher.Database,
			Collection: cs.Collection,
			Store:      e.snapshotStore(),
			Source: engine.NewSnapshotSource(e.watcher.Client, e.watcher.Database, cs.Collection, cs.SnapshotFilter,
				e.watcher.Bounded(rt.cfg.ConnectTimeout), cs.CursorComment()+":snapshot", ""),
			Policy:       cs.Snapshot,
			Dispatcher:   dispatcherName,
			Checkpointer: checkpointerName,
			IOTimeout:    max(rt.cfg.ConnectTimeout, snapshotReadTimeout),
			Clock:        rt.clk,
			Logger:       rt.log,
			Observer:     rt.obs,
		})
		if err != nil {
			return nil, fmt.Errorf("watchtree: stream %q: snapshot actor: %w", cs.Name, err)
		}
		siblings = append(siblings, supervisor.Sibling{Name: snapshotName, Props: sProps})
	}
	if cs.Collection != "" {
		// Every collection stream can take an on-demand snapshot (Handle.Snapshot). The actor,
		// its props and its source are made by the first one: most streams never take one.
		siblings = append(siblings, supervisor.Sibling{Name: snapshot.OnDemandName, Lazy: true, NewProps: e.onDemandProps})
	}
	var leaderProps *actor.Props
	if leases != nil {
		if leaderProps, err = e.leaderProps(leases); err != nil {
			return nil, fmt.Errorf("watchtree: stream %q: leader: %w", cs.Name, err)
		}
	}
	props, err := supervisor.New(supervisor.Config{
		Stream: cs.Name,
		Child:  child,
		Leader: leaderProps,
		// An operator's lease release lets a standby take over: this instance waits a standby
		// poll period (the standbys act on the store's change notice at once, or at their poll).
		ReleaseCooldown:  rt.cfg.Lease.WithDefaults().StandbyPoll,
		Siblings:         siblings,
		OnDemand:         snapshot.OnDemandName,
		Policy:           cs.Restart,
		Classify:         engine.ClassifyFailure,
		SenderMiddleware: rt.treeSenderMW,
		Clock:            rt.clk,
		Logger:           rt.log,
		Observer:         rt.obs,
		OnTransition:     e.onTransition,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: supervisor: %w", cs.Name, err)
	}
	if len(rt.treeSenderMW) > 0 {
		props = props.Clone(actor.WithSenderMiddleware(rt.treeSenderMW...))
	}
	return props, nil
}

// fence tells the supervisor that a write of the stream was refused by a newer epoch.
func (e *streamEntry) fence(f *wire.Fenced) {
	if pid, root := e.supervisorPID(), e.rt.sysRoot(); pid != nil && root != nil {
		root.Send(pid, f)
	}
}

// onDemandProps makes the props of the stream's on-demand snapshot actor (a collection stream's
// Lazy sibling, see treeProps), on the supervisor's goroutine; its watermarks go to the
// records' database, which database-wide streams skip. Its configuration is the compiled
// stream's, validated by Spawn: the error is not expected.
func (e *streamEntry) onDemandProps() (*actor.Props, error) {
	cs, rt := e.cs, e.rt
	signalsDB := e.storeDB
	if signalsDB == "" {
		signalsDB = e.watcher.Database
	}
	src := engine.NewSnapshotSource(e.watcher.Client, e.watcher.Database, cs.Collection, cs.SnapshotFilter,
		e.watcher.Bounded(rt.cfg.ConnectTimeout), cs.CursorComment()+":ondemand", signalsDB)
	props, err := snapshot.NewOnDemand(snapshot.OnDemandConfig{
		Stream:     cs.Name,
		Instance:   e.records.Instance,
		Database:   e.watcher.Database,
		Collection: cs.Collection,
		Source:     src,
		BatchSize:  cs.Snapshot.WithDefaults().BatchSize,
		Dispatcher: dispatcherName,
		IOTimeout:  max(rt.cfg.ConnectTimeout, snapshotReadTimeout),
		Clock:      rt.clk,
		Logger:     rt.log,
		Observer:   rt.obs,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: on-demand snapshot actor: %w", cs.Name, err)
	}
	return props, nil
}

// streamProps builds the stream actor's props (the supervisor's restartable child).
func (e *streamEntry) streamProps() (*actor.Props, error) {
	props, err := stream.New(stream.Config{
		Stream:            e.cs.Name,
		Watcher:           e.watcher.Bounded(e.rt.cfg.ConnectTimeout),
		Checkpointer:      checkpointerName,
		Dispatcher:        dispatcherName,
		MaxAwaitTime:      e.watcher.MaxAwait,
		InvalidateRestart: e.cs.InvalidateRestart,
		Clock:             e.rt.clk,
		Logger:            e.rt.log,
		Observer:          e.rt.obs,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: stream actor: %w", e.cs.Name, err)
	}
	return props, nil
}
