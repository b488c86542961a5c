package watchtree

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

	"github.com/watchtree/watchtree/console"
	"github.com/watchtree/watchtree/internal/clock"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/observe"
)

// runtimeState is the lifecycle of a Runtime: new → started → stopped (final).
type runtimeState uint8

const (
	rtNew runtimeState = iota
	rtStarted
	rtStopping
	rtStopped
)

// runtimeSeq numbers runtimes in the process, so that several runtimes can share one actor
// system (Config.ActorSystem) without actor-name clashes.
var runtimeSeq atomic.Uint64

// Runtime runs stream trees: one supervisor per stream, with its checkpointer, dispatcher and
// stream actor. Create it with New, start it with Start, add streams with Spawn (or
// Props), and stop everything with Stop. All methods are safe for concurrent use.
//
// Lifecycle: New validates and does no I/O; Start creates (or joins) the actor system and
// prepares the stores; Spawn needs a started runtime; Stop is final (a stopped runtime cannot be
// started again: create a new one, which resumes every stream from its checkpoint).
type Runtime struct {
	cfg    Config
	log    *zap.Logger
	prefix string // actor-name prefix of this runtime's supervisors: "watchtree-<n>"
	clk    clock.Clock

	// sysOpts are extra options for the runtime's own actor system (tests).
	sysOpts []actor.ConfigOption
	// treeSenderMW is added to every actor of every stream tree (tests: protocheck).
	treeSenderMW []actor.SenderMiddleware

	mu        sync.Mutex
	state     runtimeState
	sys       *actor.ActorSystem
	ownSystem bool
	obs       *safeObserver
	streams   map[string]*streamEntry
	stores    *engine.StoreSets
	console   *console.Server // nil when Config.Console is off
	startedAt time.Time

	bal *engine.Balancer // SingleLeader balance: started with the first such stream, stopped by Stop
}

// New validates cfg and returns a runtime. It does not connect to anything; Start does the
// first I/O. The error is a *ConfigError (several joined) naming the field.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	named := cfg.InstanceName != ""
	cfg = cfg.withDefaults()
	if !named {
		if err := defaultInstanceNameError(cfg.InstanceName); err != nil {
			return nil, err
		}
	}
	log := cfg.Logger.With(zap.String("instance", cfg.InstanceID)) // every line names the instance
	return &Runtime{
		cfg:     cfg,
		log:     log,
		prefix:  fmt.Sprintf("watchtree-%d", runtimeSeq.Add(1)),
		clk:     clock.Real(),
		streams: map[string]*streamEntry{},
		stores:  engine.NewStoreSets(cfg.Client, cfg.stores(), log),
	}, nil
}

// Start starts the runtime: it pings the primary of Config.Client, creates its actor system (or
// uses Config.ActorSystem), with protoactor's logs bridged into Config.Logger, starts the
// Observer's delivery goroutine, and, when Config.Database is set, creates the indexes of the
// stores in that database (_wt_dead_letters TTL and listing indexes, _wt_gaps listing index).
//
// The ping and the index creation together get Config.ConnectTimeout (default 10s) or ctx's
// deadline, whichever comes first. When no server answers in that time Start fails with an
// error matching ErrUnreachable and naming the bound and the driver's error, for example
// "watchtree: start: cannot reach MongoDB within 10s: server selection error: ...". A server
// that answers with an error (an authorization error, say) fails Start with that error. Any
// failure leaves the runtime unstarted, so Start may be called again. Start fails with
// ErrAlreadyStarted or ErrStopped when called twice or after Stop.
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
		case cctx.Err() != nil || mongo.IsNetworkError(err):
			return &unreachableError{within: within, err: err}
		}
		return fmt.Errorf("watchtree: start: %s: %w", what, err)
	}
	if err := rt.cfg.Client.Ping(cctx, readpref.Primary()); err != nil {
		return failed("ping the primary", err)
	}
	if rt.cfg.Database != "" {
		st, err := rt.stores.Get(rt.cfg.Database, defaultDeadLetterColl)
		if err != nil {
			return err
		}
		if err := rt.stores.CreateIndexes(cctx, st); err != nil {
			return failed("create the store indexes", err)
		}
	}
	if rt.cfg.ActorSystem != nil {
		rt.sys = rt.cfg.ActorSystem
	} else {
		rt.sys = engine.NewActorSystem(rt.log, rt.sysOpts...)
		rt.ownSystem = true
	}
	rt.startedAt = rt.clk.Now()
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
	rt.log.Info("watchtree runtime started", zap.String("instance", rt.cfg.InstanceID), zap.String("instance_name", rt.cfg.InstanceName),
		zap.String("database", rt.cfg.Database), zap.Bool("own_actor_system", rt.ownSystem))
	return nil
}

// Stop stops every stream gracefully, then the runtime. For each stream, in parallel: the stream
// actor stops (its cursor is closed, no more events are read), the dispatcher drains (finishes
// the events in flight, retries and dead-letter writes included, and reports them settled), the
// checkpointer writes the final position (right after the last settled event, so nothing is
// redelivered after a graceful stop), and the stream tree (supervisor, dispatcher,
// checkpointer) stops. A stream whose checkpointer or dispatcher failed (and is suspended by its
// supervisor) is stopped without drain and flush.
// Then the actor system is shut down if the runtime created it, and the Observer receives the
// queued events and is closed.
//
// ctx bounds the whole stop, and so does Config.ShutdownTimeout (default 30s) when it is
// earlier. When the bound passes, the remaining steps are cut short: in-flight handlers are
// cancelled, their events stay unsettled and are redelivered on the next start (at least once);
// Stop then returns an error matching context.DeadlineExceeded that says what held it up, each
// part on its own: the streams that did not stop cleanly, by name ("watchtree: stop: 1 of 3
// streams did not stop cleanly (orders): ..."), and an Observer that had not received every
// queued event ("observer did not drain 12 queued events within 30s", matching
// ErrObserverNotDrained; the events are discarded and counted in ObserverStats.Dropped).
// Stop is idempotent: a second call returns nil at once. A never-started
// runtime stops at once.
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
	entries := make([]*streamEntry, 0, len(rt.streams))
	for _, e := range rt.streams {
		entries = append(entries, e)
	}
	rt.mu.Unlock()
	rt.stores.Stop() // no index creation outlives the runtime

	ctx, cancel := context.WithTimeout(ctx, rt.cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()

	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.shutdown(ctx, "runtime stop")
		}()
	}
	wg.Wait()

	rt.mu.Lock()
	sys, own, cons, bal := rt.sys, rt.ownSystem, rt.console, rt.bal
	rt.state = rtStopped
	rt.mu.Unlock()
	if bal != nil {
		bal.Stop() // after the trees released their leases: the heartbeat goes last
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

// Streams asks every stream's supervisor for its status, in parallel, each bounded by ctx (5s
// when ctx has no deadline), and returns them sorted by name. A stream whose supervisor did not
// answer is left out and named in the error; the others are returned all the same. After Stop
// it returns each stream's last reported status.
func (rt *Runtime) Streams(ctx context.Context) ([]StreamStatus, error) {
	rt.mu.Lock()
	entries := make([]*streamEntry, 0, len(rt.streams))
	for _, e := range rt.streams {
		entries = append(entries, e)
	}
	rt.mu.Unlock()
	sts := make([]StreamStatus, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sts[i], errs[i] = e.status(ctx)
		}()
	}
	wg.Wait()
	out := make([]StreamStatus, 0, len(entries))
	for i, st := range sts {
		if errs[i] == nil {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Handle returns the handle of a spawned stream (also one spawned through Props), or an error
// matching ErrUnknownStream.
func (rt *Runtime) Handle(name string) (*Handle, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	e, ok := rt.streams[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStream, name)
	}
	return e.handle, nil
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
