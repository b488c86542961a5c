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
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// Actor names of a stream tree. The supervisor of stream "orders" on the runtime's own system
// is "watchtree-<n>/orders"; its children are ".../orders/checkpointer", ".../orders/dispatcher"
// and ".../orders/stream".
const (
	checkpointerName = treekit.CheckpointerName
	dispatcherName   = treekit.DispatcherName
	snapshotName     = treekit.SnapshotName
	onDemandName     = treekit.OnDemandName // the on-demand snapshot actor, spawned at its first request
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

// TreeConfigs are the configurations of a stream tree's actors, as treeProps passes them to
// each actor's New. Each starts from the actor's DefaultConfig, the one source of its defaults,
// and takes the compiled Spec's values (resolved by the root's compile, once) and the runtime's:
// every value field holds its value, none is left for the actor to fill in. The root's defaults
// test compares them with the documented defaults.
type TreeConfigs struct {
	Checkpointer checkpointer.Config
	Dispatcher   dispatcher.Config
	Stream       stream.Config
	// Snapshot is set for a stream that copies its collection (Spec.Snapshots).
	Snapshot *snapshot.Config
	// OnDemand is set for a collection stream (its on-demand snapshot actor, spawned lazily).
	OnDemand *snapshot.OnDemandConfig
	// Leader is set for a SingleLeader stream; its Balancer is left out.
	Leader *leader.Config
	// Supervisor lacks Child, Siblings and Leader: they are the props of the others.
	Supervisor supervisor.Config
}

// TreeConfigs returns the configurations the stream's tree is built from (see TreeConfigs).
func (e *Entry) TreeConfigs() TreeConfigs {
	c := e.treeConfigs()
	if e.spec.Collection != "" {
		od := e.onDemandConfig()
		c.OnDemand = &od
	}
	if c.Leader != nil {
		c.Leader.Balancer = nil
	}
	return c
}

// treeConfigs builds the actor configurations of treeProps. The StartPosition (Latest, At)
// applies to the first start of the tree only: the checkpointer's instances share that memory,
// so later starts, and a tree rebuilt by a user's parent, resume from the checkpoint.
func (e *Entry) treeConfigs() TreeConfigs {
	cs, rt := e.spec, e.rt
	start := cs.Start
	if e.resumeSeed {
		start = policy.Resume
	}
	cps := e.store.checkpoints
	if e.txn != nil {
		cps = purgingCheckpoints{CheckpointStore: cps, rec: e.txn}
	}
	var tc TreeConfigs
	cp := checkpointer.DefaultConfig()
	cp.Stream = cs.Name
	cp.Instance = e.records.Instance
	cp.Store = cps
	cp.Admit = rt.cpWrites.admit
	cp.Gaps = e.store.gaps
	cp.Positions = e.positions()
	cp.StartPosition = start
	cp.OnHistoryLost = cs.OnHistoryLost
	cp.Snapshot = cs.Snapshot
	cp.Snapshots = e.snapshotStore()
	// An Ephemeral policy stays as compiled: its fields must be 0 (it writes no checkpoint) and
	// the checkpointer fills them from the same policy defaults.
	cp.Checkpoint = cs.Checkpoint
	cp.IOTimeout = rt.cfg.ConnectTimeout
	cp.Owner = rt.cfg.InstanceID
	cp.Epoch = e.epoch.Load
	cp.Clock, cp.Logger, cp.Observer = rt.clk, rt.log, rt.obs
	tc.Checkpointer = cp

	var leases store.LeaseStore
	if cs.SingleLeader {
		leases = e.store.leases // set: databases made sure the default has a database
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
	d := dispatcher.DefaultConfig()
	d.Stream = cs.Name
	d.Instance = e.records.Instance
	d.Router = e.routerFor()
	d.Lanes = cs.Lanes
	d.Retry = cs.Retry
	d.DeadLetters = dl
	d.DeadLetterRetention = cs.DeadLetter.Retention
	d.AwaitSettleLimit = true // the checkpointer's settle limit bounds the unwritten settlements (MaxUnflushed)
	d.CheckpointerName = checkpointerName
	d.MayStart = e.mayStart()
	d.Clock, d.Logger, d.Observer = rt.clk, rt.log, rt.obs
	tc.Dispatcher = d

	st := stream.DefaultConfig()
	st.Stream = cs.Name
	st.Watcher = e.streamWatcher()
	st.Checkpointer, st.Dispatcher, st.Snapshot = checkpointerName, dispatcherName, snapshotName
	st.MaxAwaitTime = e.watcher.MaxAwait
	st.InvalidateRestart = cs.InvalidateRestart
	st.Clock, st.Logger, st.Observer = rt.clk, rt.log, rt.obs
	tc.Stream = st

	if cs.Snapshots() {
		sc := snapshot.DefaultConfig()
		sc.Stream = cs.Name
		sc.Instance = e.records.Instance
		sc.Database = e.watcher.Database
		sc.Collection = cs.Collection
		sc.Store = e.snapshotStore()
		sc.Source = newSnapshotSource(e.watcher.Client, e.watcher.Database, cs.Collection, cs.SnapshotFilter,
			e.watcher.bounded(rt.cfg.ConnectTimeout), cs.CursorComment()+":snapshot", "")
		sc.Policy = cs.Snapshot
		sc.Dispatcher, sc.Checkpointer = dispatcherName, checkpointerName
		sc.IOTimeout = max(rt.cfg.ConnectTimeout, snapshotReadTimeout)
		sc.Clock, sc.Logger, sc.Observer = rt.clk, rt.log, rt.obs
		tc.Snapshot = &sc
	}
	if leases != nil {
		lc := e.leaderConfig(leases)
		tc.Leader = &lc
	}

	sup := supervisor.DefaultConfig()
	sup.Stream = cs.Name
	// An operator's lease release lets a standby take over: this instance leaves the lease to
	// the others for the release window, min(RenewEvery, StandbyPoll) (a standby acts on the
	// store's change notice at once), and competes again at its end when nobody took it. The
	// window ends as soon as another instance is seen to hold it (the leader actor), so that
	// the releasing instance is a plain standby behind the new leader.
	sup.ReleaseCooldown = releaseWindow(rt.cfg.Lease)
	sup.Dispatcher, sup.Checkpointer, sup.OnDemand = dispatcherName, checkpointerName, onDemandName
	sup.Policy = cs.Restart
	sup.Classify = classifyFailure
	sup.SenderMiddleware = rt.treeSenderMW
	sup.Clock, sup.Logger, sup.Observer = rt.clk, rt.log, rt.obs
	sup.OnTransition = e.onTransition
	tc.Supervisor = sup
	return tc
}

// treeProps builds the props of the stream's supervisor and its tree from treeConfigs.
func (e *Entry) treeProps() (*actor.Props, error) {
	cs, rt := e.spec, e.rt
	tc := e.treeConfigs()
	cpProps, err := checkpointer.New(tc.Checkpointer)
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: checkpointer: %w", cs.Name, err)
	}
	dProps, err := dispatcher.New(tc.Dispatcher)
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: dispatcher: %w", cs.Name, err)
	}
	child, err := stream.New(tc.Stream)
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: stream actor: %w", cs.Name, err)
	}
	// The checkpointer first: the dispatcher resolves it by name, and the reverse stop order
	// lets the dispatcher's last SettledBatch reach it. The snapshot actor last: it stops first.
	siblings := []supervisor.Sibling{
		{Name: checkpointerName, Props: cpProps},
		{Name: dispatcherName, Props: dProps},
	}
	if tc.Snapshot != nil {
		sProps, err := snapshot.New(*tc.Snapshot)
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
	if tc.Leader != nil {
		if leaderProps, err = leader.New(*tc.Leader); err != nil {
			return nil, fmt.Errorf("watchtree: stream %q: leader: %w", cs.Name, err)
		}
	}
	sup := tc.Supervisor
	sup.Child, sup.Leader, sup.Siblings = child, leaderProps, siblings
	props, err := supervisor.New(sup)
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
// Lazy sibling, see treeProps), on the supervisor's goroutine. Its configuration is the compiled
// stream's, validated by Spawn: the error is not expected.
func (e *Entry) onDemandProps() (*actor.Props, error) {
	props, err := snapshot.NewOnDemand(e.onDemandConfig())
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: on-demand snapshot actor: %w", e.spec.Name, err)
	}
	return props, nil
}

// onDemandConfig is the on-demand snapshot actor's configuration; its watermarks go to the
// records' database, which database-wide streams skip.
func (e *Entry) onDemandConfig() snapshot.OnDemandConfig {
	cs, rt := e.spec, e.rt
	signalsDB := e.storeDB
	if signalsDB == "" {
		signalsDB = e.watcher.Database
	}
	c := snapshot.DefaultOnDemandConfig()
	c.Stream = cs.Name
	c.Instance = e.records.Instance
	c.Database = e.watcher.Database
	c.Collection = cs.Collection
	c.Source = newSnapshotSource(e.watcher.Client, e.watcher.Database, cs.Collection, cs.SnapshotFilter,
		e.watcher.bounded(rt.cfg.ConnectTimeout), cs.CursorComment()+":ondemand", signalsDB)
	c.BatchSize = cs.Snapshot.BatchSize
	c.Dispatcher = dispatcherName
	c.IOTimeout = max(rt.cfg.ConnectTimeout, snapshotReadTimeout)
	c.Clock, c.Logger, c.Observer = rt.clk, rt.log, rt.obs
	return c
}

// leaderConfig is the leader actor's configuration of a SingleLeader stream.
func (e *Entry) leaderConfig(leases store.LeaseStore) leader.Config {
	rt := e.rt
	c := leader.DefaultConfig()
	c.Stream = e.name
	c.Owner = rt.cfg.InstanceID
	c.Store = leases
	c.Policy = rt.cfg.Lease
	if rt.cfg.Lease.Balance == policy.BalanceOn {
		c.Balancer = rt.balancerFor(leases, e.name)
	}
	c.IOTimeout = rt.cfg.ConnectTimeout
	c.Clock, c.Logger, c.Observer = rt.clk, rt.log, rt.obs
	// Before the supervisor hears of the lease: every write of the term carries its epoch.
	c.OnAcquired = e.epoch.Store
	c.OnValidUntil = e.setValidUntil
	return c
}

// timedRouter times each handler call of the router it wraps for a HandlerObserver.
type timedRouter struct {
	dispatcher.Router
	stream string
	obs    observe.HandlerObserver
	log    *zap.Logger
	now    func() time.Time
}

func (r timedRouter) Route(raw bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
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
