package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/configerr"
	"github.com/watchtree/watchtree/internal/consoleserver"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/mongostore"
)

// Config is the runtime's configuration, watchtree.Config validated and defaulted by the root
// package: every field holds its value, none its zero default (but Database, ActorSystem and
// Console.Addr, whose zero value means something, and the Stores left to the default).
type Config struct {
	// Client is the MongoDB client of the default stores and of every stream without its own.
	Client *mongo.Client
	// Database is the default store database ("": each stream's own).
	Database string
	// Logger receives the runtime's logs.
	Logger *zap.Logger
	// ActorSystem is the user's system to run the trees in; nil: the runtime creates its own.
	ActorSystem *actor.ActorSystem
	// Observer receives the events, through the runtime's queue.
	Observer observe.Observer
	// InstanceID and InstanceName identify this run of the process and this instance.
	InstanceID, InstanceName string
	// ShutdownTimeout bounds Stop; ConnectTimeout every wait for a reachable server.
	ShutdownTimeout, ConnectTimeout time.Duration
	// Stores are Config's store fields.
	Stores Stores
	// Lease is the lease policy of every SingleLeader stream, every default resolved by the root.
	Lease policy.Lease
	// Console configures the remote console; Addr "" is off. Its Logger and Clock are the
	// runtime's.
	Console consoleserver.Config
	// Clock is the time source of every actor, timer and stamp of the runtime
	// (watchtree.Config.Clock; clock.Real() by default).
	Clock clock.Clock
}

// state is the lifecycle of a Runtime: new → started → stopping → stopped (final).
type state uint8

const (
	rtNew state = iota
	rtStarted
	rtStopping
	rtStopped
)

// runtimeSeq numbers runtimes in the process, so that several runtimes can share one actor
// system (Config.ActorSystem) without actor-name clashes.
var runtimeSeq atomic.Uint64

// Runtime is watchtree.Runtime's engine: the registry of the streams, their stores, the
// actor system, the Observer's queue, the console and the ordered shutdown. All methods are
// safe for concurrent use.
type Runtime struct {
	cfg    Config
	log    *zap.Logger
	prefix string // actor-name prefix of this runtime's supervisors: "watchtree-<n>"
	clk    clock.Clock
	stores *StoreSets

	// treeSenderMW is added to every actor of every stream tree (tests: protocheck).
	treeSenderMW []actor.SenderMiddleware

	mu        sync.Mutex
	state     state
	sys       *actor.ActorSystem
	ownSystem bool
	obs       *safeObserver
	streams   map[string]*Entry
	console   *consoleserver.Server // nil when Config.Console is off
	startedAt time.Time
	reads     *serverReads // the figures only MongoDB gives, from memory; nil outside started

	bal *balancer // SingleLeader balance: started with the first such stream, stopped by Stop

	nsLogOnce sync.Once
	nsLog     *namespaceLog // the namespace-missing log, summarised across streams (namespace.go)
	hubs      *hubSet       // the shared cursors (hub.go): made by Start, stopped by Stop after the streams
	nsChecks  tokens        // a token per namespace check under way (namespace.go: namespaceChecks)
	cpWrites  tokens        // a token per checkpointer store call under way (cpwrites.go: CheckpointWrites)
}

// New returns a runtime of cfg. It does no I/O.
func New(cfg Config) *Runtime {
	log := cfg.Logger.With(zap.String("instance", cfg.InstanceID)) // every line names the instance
	return &Runtime{
		cfg:      cfg,
		log:      log,
		prefix:   fmt.Sprintf("watchtree-%d", runtimeSeq.Add(1)),
		clk:      cfg.Clock,
		streams:  map[string]*Entry{},
		stores:   newStoreSets(cfg.Client, cfg.Stores, log),
		nsChecks: newTokens(namespaceChecks, "namespace checks"),
		cpWrites: newTokens(CheckpointWrites, "checkpoint store calls"),
	}
}

// UseTreeSenderMiddleware adds mw to every actor of every stream tree spawned afterwards (tests:
// internal/protocheck). Call it before Start.
func (rt *Runtime) UseTreeSenderMiddleware(mw ...actor.SenderMiddleware) {
	rt.treeSenderMW = append(rt.treeSenderMW, mw...)
}

// Start is watchtree.Runtime.Start: the ping (errors matching ErrUnreachable when no server
// answered within ConnectTimeout), the indexes of the stores in Config.Database, the actor
// system, the console and the Observer's queue. A failure leaves the runtime unstarted.
func (rt *Runtime) Start(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch rt.state {
	case rtStarted:
		return ErrAlreadyStarted
	case rtStopping, rtStopped:
		return ErrStopped
	}
	// Without this bound an unreachable server holds Start for the driver's server selection
	// timeout (30s) and then fails with a bare driver error.
	within := rt.cfg.ConnectTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < within {
		within = max(time.Until(dl), 0).Round(time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, rt.cfg.ConnectTimeout)
	defer cancel()
	// failed reports a timeout or a network error as unreachable; a server's answer (an
	// authorization error, say) is reported as it is.
	failed := func(what string, err error) error {
		switch {
		case ctx.Err() == context.Canceled:
			return fmt.Errorf("watchtree: start: cancelled while reaching MongoDB: %w", err)
		case poolWait(err):
			return fmt.Errorf("watchtree: start: %s: %w", what, explainPool(err))
		case cctx.Err() != nil || mongo.IsNetworkError(err):
			return &unreachableError{within: within, err: err}
		}
		return fmt.Errorf("watchtree: start: %s: %w", what, err)
	}
	if err := rt.cfg.Client.Ping(cctx, readpref.Primary()); err != nil {
		return failed("ping the primary", err)
	}
	if rt.cfg.Database != "" {
		st, err := rt.stores.get(rt.cfg.Database, mongostore.DefaultDeadLetterCollection)
		if err != nil {
			return err
		}
		if err := rt.stores.createIndexes(cctx, st); err != nil {
			return failed("create the store indexes", err)
		}
	}
	if rt.cfg.ActorSystem != nil {
		rt.sys = rt.cfg.ActorSystem
	} else {
		rt.sys = NewActorSystem(rt.log)
		rt.ownSystem = true
	}
	rt.startedAt = rt.clk.Now()
	rt.hubs = newHubSet(rt.clk, rt.log, rt.cfg.ConnectTimeout)
	if err := rt.startConsoleLocked(); err != nil {
		if rt.ownSystem {
			rt.sys.Shutdown()
		}
		rt.sys, rt.ownSystem = nil, false
		return err
	}
	obs := rt.cfg.Observer
	if rt.console != nil {
		obs = observe.Multi(obs, rt.console) // the console's live feed
	}
	rt.obs = newSafeObserver(obs, 0, rt.log)
	rt.state = rtStarted
	rt.reads = startServerReads(rt)
	rt.log.Info("watchtree runtime started", zap.String("instance_name", rt.cfg.InstanceName), // rt.log names the instance
		zap.String("database", rt.cfg.Database), zap.Bool("own_actor_system", rt.ownSystem))
	return nil
}

// Stop is watchtree.Runtime.Stop: every stream's graceful stop in parallel, then the balancer's
// heartbeat, the console and the actor system (when the runtime created it), and the Observer's
// queue, bounded by ctx and ShutdownTimeout; the streams that did not stop cleanly and an
// Observer that did not drain are reported apart.
func (rt *Runtime) Stop(ctx context.Context) error {
	rt.mu.Lock()
	switch rt.state {
	case rtNew:
		rt.state = rtStopped
		rt.mu.Unlock()
		return nil
	case rtStopping, rtStopped:
		rt.mu.Unlock()
		return nil
	}
	rt.state = rtStopping
	entries := rt.entriesLocked()
	reads := rt.reads
	rt.reads = nil
	rt.mu.Unlock()
	rt.stores.stop() // no index creation outlives the runtime
	reads.stop()     // a refresh under way is cancelled: it must not hold the stop

	ctx, cancel := context.WithTimeout(ctx, rt.cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()

	// The streams get the bound less a reserve, so that the steps after them (the heartbeat's
	// Leave, the console, the Observer's drain) still end within it when a stream's flush runs
	// out, e.g. with MongoDB unreachable.
	sctx, scancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		sctx, scancel = context.WithDeadline(ctx, dl.Add(-stopReserve(time.Until(dl))))
	}
	defer scancel()
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			errs[i] = e.shutdown(sctx, "runtime stop")
		})
	}
	wg.Wait()

	rt.mu.Lock()
	sys, own, cons, bal, hubs := rt.sys, rt.ownSystem, rt.console, rt.bal, rt.hubs
	rt.state = rtStopped
	rt.mu.Unlock()
	if hubs != nil {
		hubs.stop() // after the streams: their members left, and no goroutine of a hub outlives Stop
	}
	if bal != nil {
		// After the trees released their leases: the heartbeat goes last. Its Leave gets half
		// of what is left, the console and the Observer the rest.
		lctx, lcancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			lctx, lcancel = context.WithTimeout(ctx, time.Until(dl)/2)
		}
		bal.stop(lctx)
		lcancel()
	}
	var consoleErr error
	if cons != nil { // after the streams, so that an operator sees the stop to its end
		consoleErr = cons.Stop(ctx)
	}
	if own {
		sys.Shutdown()
	}
	// The streams and the Observer are reported apart: a slow Observer must not read as a
	// stream that did not stop, nor the reverse.
	var streamsErr error
	var unclean []string
	for i, err := range errs {
		if err != nil {
			unclean = append(unclean, entries[i].name)
		}
	}
	if len(unclean) > 0 {
		sort.Strings(unclean)
		streamsErr = fmt.Errorf("%d of %d streams did not stop cleanly (%s): %w", len(unclean), len(entries),
			strings.Join(unclean, ", "), errors.Join(errs...))
	}
	obsErr := rt.obs.closeFrom(ctx, start)
	err := errors.Join(streamsErr, consoleErr, obsErr)
	if err != nil {
		rt.log.Warn("watchtree runtime stopped with errors", zap.Duration("took", time.Since(start)), zap.Error(err))
		return fmt.Errorf("watchtree: stop: %w", err)
	}
	rt.log.Info("watchtree runtime stopped", zap.Duration("took", time.Since(start)),
		zap.Int("streams", len(entries)))
	return nil
}

// stopReserve is the part of Stop's bound kept for the steps after the streams: a tenth of
// it, at most 500ms.
func stopReserve(bound time.Duration) time.Duration {
	return min(max(bound, 0)/10, 500*time.Millisecond)
}

// entriesLocked returns the registered entries; rt.mu is held.
func (rt *Runtime) entriesLocked() []*Entry {
	entries := make([]*Entry, 0, len(rt.streams))
	for _, e := range rt.streams {
		entries = append(entries, e)
	}
	return entries
}

// StreamStatus is one stream's reply in Streams: Reply is nil when its supervisor never
// answered (see Entry.Status).
type StreamStatus struct {
	Entry *Entry
	Reply *messages.StatusReply
}

// Streams asks every stream's supervisor for its status, in parallel, each bounded by ctx (5s
// without a deadline), and returns them sorted by name. A stream whose supervisor did not
// answer is left out and named in the error; the others are returned all the same.
func (rt *Runtime) Streams(ctx context.Context) ([]StreamStatus, error) {
	rt.mu.Lock()
	entries := rt.entriesLocked()
	rt.mu.Unlock()
	sts := make([]StreamStatus, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			sts[i].Entry = e
			sts[i].Reply, errs[i] = e.Status(ctx)
		})
	}
	wg.Wait()
	out := make([]StreamStatus, 0, len(entries))
	for i, st := range sts {
		if errs[i] == nil {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entry.name < out[j].Entry.name })
	return out, errors.Join(errs...)
}

// Entry returns the entry of a registered stream (by Spawn or Props), or an error matching
// ErrUnknownStream.
func (rt *Runtime) Entry(name string) (*Entry, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	e, ok := rt.streams[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStream, name)
	}
	return e, nil
}

// registeredEntry returns the entry of stream, which must be registered on rt; hint explains
// an unknown stream. It fails with ErrNotStarted before Start.
func (rt *Runtime) registeredEntry(stream, hint string) (*Entry, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.state == rtNew {
		return nil, ErrNotStarted
	}
	e, ok := rt.streams[stream]
	if !ok {
		return nil, fmt.Errorf("%w: %q (%s)", ErrUnknownStream, stream, hint)
	}
	return e, nil
}

// Spawn registers spec, spawns its tree and waits until its change stream is open (or, for a
// SingleLeader stream, until it is in standby with its start position saved: fixLeaderStart),
// bounded by ctx (30s without a deadline): watchtree.Runtime.Spawn. A failure leaves nothing
// registered.
func (rt *Runtime) Spawn(ctx context.Context, spec *Spec) (*Entry, error) {
	e, err := rt.register(spec, true)
	if err != nil {
		return nil, err
	}
	if e.shared {
		// Shared streams start a few at a time (each start reads and writes its checkpoint,
		// captures a position and checks its namespace): a thousand Spawns at once then stay
		// within the connection budget of shared cursors.
		if err := rt.hubs.starts.take(ctx); err != nil {
			rt.unregister(e)
			return nil, err
		}
		defer rt.hubs.starts.give()
	}
	if err := e.fixLeaderStart(ctx); err != nil {
		rt.unregister(e)
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
	e.startNamespaceWatch(ctx)
	e.log.Info("stream spawned", zap.Stringer("scope", spec.Scope()), zap.String("database", e.watcher.Database),
		zap.String("collection", spec.Collection), zap.Int("lanes", spec.Lanes), zap.String("mode", spec.Mode()),
		zap.String("cursor", e.CursorMode()))
	switch {
	case e.SharedWhy() != "":
		e.log.Warn("Cursor Shared: this stream keeps a dedicated cursor", zap.String("reason", e.sharedWhy))
	case e.sharedWhy != "":
		e.log.Info("this stream reads on a dedicated cursor", zap.String("reason", e.sharedWhy))
	}
	return e, nil
}

// Props registers spec and returns the props of its supervisor, for the user to spawn
// (watchtree.Props); the props record the supervisor's PID while it lives.
func (rt *Runtime) Props(spec *Spec) (*actor.Props, error) {
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

// register resolves spec's databases and stores, and adds it to the registry. The errors are
// *configerr.Error values naming the field, ErrNotStarted and ErrStopped.
func (rt *Runtime) register(spec *Spec, owned bool) (*Entry, error) {
	watchDB, storeDB, err := rt.databases(spec)
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
	if _, dup := rt.streams[spec.Name]; dup {
		rt.mu.Unlock()
		return nil, &configerr.Error{Stream: spec.Name, Field: "Name", Rule: "is already spawned on this runtime (stream names must be unique)",
			Err: ErrDuplicateStream}
	}
	st, err := rt.stores.get(storeDB, spec.DeadLetter.Collection)
	if err != nil {
		rt.mu.Unlock()
		return nil, err
	}
	if spec.Snapshots() && !spec.Checkpoint.Ephemeral && st.snapshots == nil {
		rt.mu.Unlock()
		return nil, &configerr.Error{Stream: spec.Name, Field: "Config.Snapshots",
			Rule: "must be set for a stream that snapshots (Snapshot.Mode, or OnHistoryLost RebuildFromSnapshot) when Config.Checkpoints is set: the snapshot records go with the checkpoints, so the default MongoDB store serves only the default checkpoints"}
	}
	e := newEntry(rt, spec, st, watchDB, storeDB, owned)
	rt.streams[spec.Name] = e
	rt.mu.Unlock()
	rt.stores.createIndexesLater(st)
	return e, nil
}

func (rt *Runtime) unregister(e *Entry) {
	rt.mu.Lock()
	if rt.streams[e.name] == e {
		delete(rt.streams, e.name)
		if rt.bal != nil {
			rt.bal.remove(e.name)
		}
	}
	rt.mu.Unlock()
}

// databases resolves the watched database and the store database of spec (empty when Config
// sets every store spec uses and spec names none), and rejects a DeadLetterPolicy.Collection
// that Config.DeadLetters would ignore.
func (rt *Runtime) databases(spec *Spec) (watchDB, storeDB string, err error) {
	watchDB = spec.Database
	if spec.Scope() == ScopeCollection && watchDB == "" {
		watchDB = rt.cfg.Database
	}
	if spec.Scope() == ScopeCollection && watchDB == "" {
		return "", "", &configerr.Error{Stream: spec.Name, Field: "Database",
			Rule: "must be set when Config.Database is empty (the watched collection needs a database)"}
	}
	if rt.cfg.Stores.DeadLetters != nil && spec.DeadLetter.Collection != mongostore.DefaultDeadLetterCollection {
		// The collection would be silently ignored: Config.DeadLetters serves every stream.
		return "", "", &configerr.Error{Stream: spec.Name, Field: "DeadLetter.Collection",
			Rule: fmt.Sprintf("must be empty when Config.DeadLetters is set, got %q", spec.DeadLetter.Collection)}
	}
	storeDB = rt.cfg.Database
	if storeDB == "" {
		storeDB = watchDB
	}
	if spec.Transactional && storeDB == "" {
		return "", "", &configerr.Error{Stream: spec.Name, Field: "Database",
			Rule: "must be set when Config.Database is empty (a Transactional cluster-wide stream's applied records need a database)"}
	}
	if field := rt.cfg.Stores.needsDatabase(spec); storeDB == "" && field != "" {
		return "", "", &configerr.Error{Stream: spec.Name, Field: "Database",
			Rule: fmt.Sprintf("must be set when Config.Database is empty (a cluster-wide stream's default stores need a database: Config.%s is nil)", field)}
	}
	return watchDB, storeDB, nil
}

// instanceWarnings are the console's warnings about the instance: another live process with
// its InstanceName, as the SingleLeader balancer's heartbeats show (none without such a stream).
func (rt *Runtime) instanceWarnings() []string {
	rt.mu.Lock()
	b := rt.bal
	rt.mu.Unlock()
	if b == nil {
		return nil
	}
	if dups := b.duplicates(); len(dups) > 0 {
		return []string{fmt.Sprintf("InstanceName %q is also used by the live instance %s: they share the positions and dead letters of the AllInstances streams; give each process its own InstanceName",
			rt.cfg.InstanceName, strings.Join(dups, ", "))}
	}
	return nil
}

// balancerFor returns the runtime's balancer (started with the first SingleLeader stream) with
// stream counted in it.
func (rt *Runtime) balancerFor(leases store.LeaseStore, stream string) *balancer {
	rt.mu.Lock()
	if rt.bal == nil {
		rt.bal = newBalancer(leases, rt.cfg.Lease, rt.cfg.InstanceID, rt.cfg.InstanceName, rt.cfg.ConnectTimeout, rt.clk, rt.log)
	}
	b := rt.bal
	rt.mu.Unlock()
	b.add(stream)
	return b
}

// system returns the actor system, or an error when the runtime is not started.
func (rt *Runtime) system() (*actor.ActorSystem, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch rt.state {
	case rtNew:
		return nil, ErrNotStarted
	case rtStopping, rtStopped:
		return nil, ErrStopped
	}
	return rt.sys, nil
}

// sysRoot is the root context of the runtime's actor system (nil before Start).
func (rt *Runtime) sysRoot() *actor.RootContext {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sys == nil {
		return nil
	}
	return rt.sys.Root
}

// Now is the runtime's clock.
func (rt *Runtime) Now() time.Time { return rt.clk.Now() }

// OplogWindow is watchtree.Runtime.OplogWindow: ErrNotStarted or ErrStopped outside a started
// runtime, else the oplog's bounds read through Config.Client.
func (rt *Runtime) OplogWindow(ctx context.Context) (oldest, newest time.Time, err error) {
	if _, err := rt.system(); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return oplogWindow(ctx, rt.cfg.Client, rt.cfg.ConnectTimeout)
}

// ObserverStats counts what became of the events meant for the Observer since Start
// (watchtree.ObserverStats).
type ObserverStats struct {
	Delivered, Dropped, Panicked uint64
}

// ObserverStats returns the counts of the runtime's Observer events: all zero before Start,
// and final after Stop (three atomic loads).
func (rt *Runtime) ObserverStats() ObserverStats {
	rt.mu.Lock()
	obs := rt.obs
	rt.mu.Unlock()
	if obs == nil {
		return ObserverStats{}
	}
	return ObserverStats{Delivered: obs.Delivered(), Dropped: obs.Dropped(), Panicked: obs.Panics()}
}

// ActorSystem is the actor system the trees run in (nil before Start): the user's
// Config.ActorSystem, or the runtime's own.
func (rt *Runtime) ActorSystem() *actor.ActorSystem {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.sys
}

// StoreSets returns the runtime's store sets (tests read the index creation through it).
func (rt *Runtime) StoreSets() *StoreSets { return rt.stores }
