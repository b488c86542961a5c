package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/leader"
	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/policy"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
)

// Actor names of a stream tree. The supervisor of stream "orders" on the runtime's own system
// is "watchtree-<n>/orders"; its children are ".../orders/checkpointer", ".../orders/dispatcher"
// and ".../orders/stream".
const (
	checkpointerName = "checkpointer"
	dispatcherName   = "dispatcher"
	snapshotName     = "snapshot"
	onDemandName     = "ondemand" // the on-demand snapshot actor, spawned at its first request
)

// snapshotReadTimeout is the least time a snapshot's store and read calls get (a chunk of
// BatchSize documents, or the planning queries on a large collection, take longer than a
// connection).
const snapshotReadTimeout = time.Minute

// snapshotStore is the stream's snapshot store when the stream can run a snapshot, else nil
// (the checkpointer then never looks for a snapshot record).
func (e *Entry) snapshotStore() store.SnapshotStore {
	switch {
	case !e.spec.Snapshots():
		return nil
	case e.memSnapshots != nil: // Ephemeral: nothing is stored
		return e.memSnapshots
	case e.store.snapshots == nil:
		return nil
	}
	return e.store.snapshots
}

// treeProps builds the props of the stream's supervisor and its tree. The StartPosition (Latest,
// At) applies to the first start of the tree only: the checkpointer's instances share that
// memory, so later starts, and a tree rebuilt by a user's parent, resume from the checkpoint.
func (e *Entry) treeProps() (*actor.Props, error) {
	cs, rt := e.spec, e.rt
	start := cs.Start
	if e.resumeSeed {
		start = policy.Resume
	}
	var leases store.LeaseStore
	if cs.SingleLeader {
		leases = e.store.leases // set: databases made sure the default has a database
	}
	cps := e.store.checkpoints
	if e.txn != nil {
		cps = purgingCheckpoints{CheckpointStore: cps, rec: e.txn}
	}
	cpProps, err := checkpointer.New(checkpointer.Config{
		Stream:        cs.Name,
		Instance:      e.records.Instance,
		Store:         cps,
		Admit:         rt.cpWrites.admit,
		Gaps:          e.store.gaps,
		Positions:     e.positions(),
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
		dl = e.store.deadLetters
		switch {
		case e.txn != nil:
			// The transaction's fence guards the write; the default store joins the transaction.
			dl = txnDeadLetters{DeadLetterWriter: dl, rec: e.txn, inTxn: rt.cfg.Stores.DeadLetters == nil}
		case leases != nil:
			dl = fencedDeadLetters{DeadLetterStore: e.store.deadLetters, Leases: leases, Stream: e.name,
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
		MayStart:            e.mayStart(),
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
			Source: newSnapshotSource(e.watcher.Client, e.watcher.Database, cs.Collection, cs.SnapshotFilter,
				e.watcher.bounded(rt.cfg.ConnectTimeout), cs.CursorComment()+":snapshot", ""),
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
		siblings = append(siblings, supervisor.Sibling{Name: onDemandName, Lazy: true, NewProps: e.onDemandProps})
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
		// An operator's lease release lets a standby take over: this instance leaves the lease
		// to the others for the release window, min(RenewEvery, StandbyPoll) (a standby acts on
		// the store's change notice at once), and competes again at its end when nobody took
		// it. The window ends as soon as another instance is seen to hold it (the leader actor),
		// so that the releasing instance is a plain standby behind the new leader.
		ReleaseCooldown:  releaseWindow(policy.WithDefaults(rt.cfg.Lease)),
		Siblings:         siblings,
		OnDemand:         onDemandName,
		Policy:           cs.Restart,
		Classify:         classifyFailure,
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
func (e *Entry) fence(f *wire.Fenced) {
	if pid, root := e.SupervisorPID(), e.rt.sysRoot(); pid != nil && root != nil {
		root.Send(pid, f)
	}
}

// onDemandProps makes the props of the stream's on-demand snapshot actor (a collection stream's
// Lazy sibling, see treeProps), on the supervisor's goroutine; its watermarks go to the
// records' database, which database-wide streams skip. Its configuration is the compiled
// stream's, validated by Spawn: the error is not expected.
func (e *Entry) onDemandProps() (*actor.Props, error) {
	cs, rt := e.spec, e.rt
	signalsDB := e.storeDB
	if signalsDB == "" {
		signalsDB = e.watcher.Database
	}
	src := newSnapshotSource(e.watcher.Client, e.watcher.Database, cs.Collection, cs.SnapshotFilter,
		e.watcher.bounded(rt.cfg.ConnectTimeout), cs.CursorComment()+":ondemand", signalsDB)
	props, err := snapshot.NewOnDemand(snapshot.OnDemandConfig{
		Stream:     cs.Name,
		Instance:   e.records.Instance,
		Database:   e.watcher.Database,
		Collection: cs.Collection,
		Source:     src,
		BatchSize:  policy.WithDefaults(cs.Snapshot).BatchSize,
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
func (e *Entry) streamProps() (*actor.Props, error) {
	props, err := stream.New(stream.Config{
		Stream:            e.spec.Name,
		Watcher:           e.streamWatcher(),
		Checkpointer:      checkpointerName,
		Dispatcher:        dispatcherName,
		MaxAwaitTime:      e.watcher.MaxAwait,
		InvalidateRestart: e.spec.InvalidateRestart,
		Clock:             e.rt.clk,
		Logger:            e.rt.log,
		Observer:          e.rt.obs,
	})
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: stream actor: %w", e.spec.Name, err)
	}
	return props, nil
}

// leaderProps builds the leader actor of a SingleLeader stream.
func (e *Entry) leaderProps(leases store.LeaseStore) (*actor.Props, error) {
	rt := e.rt
	var bal leader.Balancer
	if rt.cfg.Lease.Balance == policy.BalanceOn {
		bal = rt.balancerFor(leases, e.name)
	}
	return leader.New(leader.Config{
		Stream:    e.name,
		Owner:     rt.cfg.InstanceID,
		Store:     leases,
		Policy:    rt.cfg.Lease,
		Balancer:  bal,
		IOTimeout: rt.cfg.ConnectTimeout,
		Clock:     rt.clk,
		Logger:    rt.log,
		Observer:  rt.obs,
		// Before the supervisor hears of the lease: every write of the term carries its epoch.
		OnAcquired:   e.epoch.Store,
		OnValidUntil: e.setValidUntil,
	})
}

// timedRouter times each handler call of the router it wraps for a HandlerObserver.
type timedRouter struct {
	dispatcher.Router
	stream string
	obs    observe.HandlerObserver
	log    *zap.Logger
	now    func() time.Time
}

func (r timedRouter) Route(raw bson.Raw) (dispatcher.Invocation, wire.Outcome, error) {
	inv, outcome, err := r.Router.Route(raw)
	if inv == nil || err != nil {
		return inv, outcome, err
	}
	return timedInvocation{inv: inv, r: r}, outcome, nil
}

type timedInvocation struct {
	inv dispatcher.Invocation
	r   timedRouter
}

// Call times the handler; a panicking handler is not timed (the dispatcher recovers it).
// Release passes the release on to the wrapped invocation.
func (t timedInvocation) Release() {
	if r, ok := t.inv.(dispatcher.Releaser); ok {
		r.Release()
	}
}

func (t timedInvocation) Call(ctx context.Context, attempt int) error {
	start := t.r.now()
	err := t.inv.Call(ctx, attempt)
	t.r.observe(t.r.now().Sub(start), err)
	return err
}

func (r timedRouter) observe(took time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("HandlerObserver panicked", zap.String("stream", r.stream), zap.Any("panic", p))
		}
	}()
	r.obs.ObserveHandler(r.stream, took, err)
}

// routerFor returns the stream's router, timed when Config.Observer is an
// observe.HandlerObserver and traced when it is an observe.HandlerTracer (observe.Multi is one
// exactly when a member is). The tracer is outermost, so the time it measures includes the
// HandlerObserver's.
func (e *Entry) routerFor() dispatcher.Router { return e.router(false) }

// router is the stream's router with the engine's wrappers; replay: for Runtime.Replay (a
// Transactional stream's replay claims the dead letter's applied record).
func (e *Entry) router(replay bool) dispatcher.Router {
	r := e.spec.Router
	if ho, ok := e.rt.cfg.Observer.(observe.HandlerObserver); ok {
		r = timedRouter{Router: r, stream: e.name, obs: ho, log: e.log, now: time.Now}
	}
	if ht, ok := e.rt.cfg.Observer.(observe.HandlerTracer); ok {
		r = tracedRouter{Router: r, stream: e.name, tr: ht, log: e.log}
	}
	if e.txn != nil {
		// Outermost, so that the dispatcher finds its dispatcher.Batcher; the timings and spans
		// are the handler's own, inside the transaction.
		r = txnRouter{Router: r, rec: e.txn, replay: replay}
	}
	return r
}

// releaseWindow is how long an instance that released a lease on an operator's request
// (ReleaseLease) leaves it to the others before it competes again: one renew period, and never
// longer than a standby poll, the longest a watching standby needs to notice the release.
func releaseWindow(p policy.Lease) time.Duration { return min(p.RenewEvery, p.StandbyPoll) }
