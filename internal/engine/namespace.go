package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/observe"
)

// namespaceCheckEvery is how often a Collection stream's collection is looked up after the check
// at Spawn, while the stream is spawned.
const namespaceCheckEvery = time.Minute

// namespaceChecks bounds the namespace checks (a listCollections each) under way at once in a
// runtime: 10,000 Collection streams check about 167 times a second, and unbounded they filled
// the client's pool (90 of 100 commands in flight at once in BenchmarkSharedManyStreams).
const namespaceChecks = 4

// namespaceWatch checks that a Collection stream's collection exists: once at Spawn (on the
// caller's goroutine), then every namespaceCheckEvery on the clock's timer goroutine, never on
// an actor's. While it is missing, every check reports it (report(true, changed, since), changed
// only at the first); the first check that finds it reports that once (report(false, true, ...)). A failed lookup (the server unreachable)
// reports nothing: the next check tries again. The Entry owns it: stop ends it, waiting for a
// check under way.
type namespaceWatch struct {
	clk    clock.Clock
	every  time.Duration
	bound  time.Duration // each periodic lookup's timeout
	exists func(ctx context.Context) (bool, error)
	report func(missing, changed bool, since time.Time)
	log    *zap.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	timer   clock.Timer
	stopped bool
	since   time.Time // when it was first found missing; zero while it exists (or unknown)
}

func newNamespaceWatch(clk clock.Clock, every, bound time.Duration, exists func(context.Context) (bool, error),
	report func(missing, changed bool, since time.Time), log *zap.Logger) *namespaceWatch {
	ctx, cancel := context.WithCancel(context.Background())
	return &namespaceWatch{clk: clk, every: every, bound: bound, exists: exists, report: report, log: log, ctx: ctx, cancel: cancel}
}

// start runs the first check with ctx (Spawn's) and arms the periodic one.
func (w *namespaceWatch) start(ctx context.Context) {
	w.check(ctx)
	w.arm()
}

func (w *namespaceWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.wg.Add(1)
	w.timer = w.clk.AfterFunc(w.every, w.tick)
}

// tick is the periodic check, on the timer's goroutine.
func (w *namespaceWatch) tick() {
	defer w.wg.Done()
	ctx, cancel := context.WithTimeout(w.ctx, w.bound)
	w.check(ctx)
	cancel()
	w.arm()
}

func (w *namespaceWatch) check(ctx context.Context) {
	ok, err := w.exists(ctx)
	if err != nil {
		if w.ctx.Err() == nil {
			w.log.Debug("namespace check failed; the next one tries again", zap.Error(err))
		}
		return
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	was := w.since
	if ok {
		w.since = time.Time{}
	} else if was.IsZero() {
		w.since = w.clk.Now()
	}
	since := w.since
	w.mu.Unlock()
	switch {
	case !ok:
		w.report(true, was.IsZero(), since)
	case !was.IsZero():
		w.report(false, true, was)
	}
}

// stop ends the checks: no report follows once it returned.
func (w *namespaceWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil && w.timer.Stop() {
		w.wg.Done() // the pending tick will not run
	}
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// startNamespaceWatch starts the check of a Collection stream's collection (Spawn).
func (e *Entry) startNamespaceWatch(ctx context.Context) {
	if e.spec.Collection == "" {
		return
	}
	ns := e.watcher.Database + "." + e.spec.Collection
	db := e.watcher.Client.Database(e.watcher.Database)
	exists := func(ctx context.Context) (bool, error) {
		if err := e.rt.nsChecks.take(ctx); err != nil {
			return false, err
		}
		defer e.rt.nsChecks.give()
		names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: e.spec.Collection}})
		return len(names) > 0, err
	}
	report := func(missing, changed bool, since time.Time) { e.reportNamespace(ns, missing, changed, since) }
	w := newNamespaceWatch(e.rt.clk, namespaceCheckEvery, e.rt.cfg.ConnectTimeout, exists, report, e.log)
	e.rt.namespaceLog().register()
	e.mu.Lock()
	e.nsWatch = w
	e.mu.Unlock()
	w.start(ctx)
}

// stopNamespaceWatch ends the check, if one runs.
func (e *Entry) stopNamespaceWatch() {
	e.mu.Lock()
	w := e.nsWatch
	e.nsWatch = nil
	e.mu.Unlock()
	if w != nil {
		w.stop()
		e.rt.namespaceLog().unregister()
	}
}

// reportNamespace tells the supervisor (its status carries the warning) and, while the
// collection is missing, the Observer (at every check). The log hears of changes only, and
// summarised across the runtime's streams (namespaceLog): 200 streams on missing collections
// would otherwise log 200 lines a minute.
func (e *Entry) reportNamespace(ns string, missing, changed bool, since time.Time) {
	warning := ""
	if missing {
		warning = fmt.Sprintf("namespace %s does not exist (since %s): the stream sees no events until it is created; check Collection and Database",
			ns, since.UTC().Format(time.RFC3339))
		e.rt.obs.OnEvent(observe.NamespaceMissing{Meta: observe.Meta{Stream: e.name, Time: e.rt.clk.Now()}, Namespace: ns, Since: since})
	}
	if changed {
		e.rt.namespaceLog().change(ns, missing, since)
	}
	if pid := e.SupervisorPID(); pid != nil {
		e.rt.sys.Root.Send(pid, &wire.NamespaceCheck{Namespace: ns, Missing: missing, Warning: warning})
	}
}

// namespaceLogEvery is the least time between two lines of the namespace log of each kind.
const namespaceLogEvery = time.Minute

// namespaceLogListed bounds the namespaces one summary line names; the count says the rest.
const namespaceLogListed = 10

// namespaceLog logs the namespace-missing state changes of all the runtime's Collection streams:
// the first change at once, then the changes of the following namespaceLogEvery together, in
// one line for the collections found missing and one for those that appeared (with their count
// and the first namespaceLogListed names). The flush runs on the clock's timer goroutine; when
// the last watch stops (the runtime stops), pending changes are logged at once.
type namespaceLog struct {
	clk   clock.Clock
	every time.Duration
	log   *zap.Logger

	mu       sync.Mutex
	wg       sync.WaitGroup
	watches  int       // namespace watches running
	last     time.Time // the latest flush; zero before the first
	missing  []string  // pending: found missing since the latest flush, oldest first
	appeared []string  // pending: found again since the latest flush
	since    time.Time // of a single pending missing namespace
	timer    clock.Timer
}

// namespaceLog returns the runtime's namespace log, made at its first use.
func (rt *Runtime) namespaceLog() *namespaceLog {
	rt.nsLogOnce.Do(func() { rt.nsLog = &namespaceLog{clk: rt.clk, every: namespaceLogEvery, log: rt.log} })
	return rt.nsLog
}

func (l *namespaceLog) register() {
	l.mu.Lock()
	l.watches++
	l.mu.Unlock()
}

// unregister ends a watch; after the last one, pending changes are logged and no flush stays
// armed.
func (l *namespaceLog) unregister() {
	l.mu.Lock()
	l.watches--
	if l.watches > 0 {
		l.mu.Unlock()
		return
	}
	if l.timer != nil && l.timer.Stop() {
		l.wg.Done() // the pending flush will not run
	}
	l.timer = nil
	l.flushLocked()
	l.mu.Unlock()
	l.wg.Wait()
}

// change records that ns was found missing (since then) or found again.
func (l *namespaceLog) change(ns string, missing bool, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if missing {
		l.missing = append(l.missing, ns)
		l.since = since
	} else {
		l.appeared = append(l.appeared, ns)
	}
	if l.timer != nil {
		return // a flush is due
	}
	now := l.clk.Now()
	if l.last.IsZero() || now.Sub(l.last) >= l.every {
		l.flushLocked()
		return
	}
	l.wg.Add(1)
	l.timer = l.clk.AfterFunc(l.last.Add(l.every).Sub(now), l.flush)
}

// flush is the armed flush, on the timer's goroutine.
func (l *namespaceLog) flush() {
	defer l.wg.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	l.flushLocked()
}

func (l *namespaceLog) flushLocked() {
	if len(l.missing) == 0 && len(l.appeared) == 0 {
		return
	}
	l.last = l.clk.Now()
	switch n := len(l.missing); {
	case n == 1:
		l.log.Warn("the watched collection does not exist: the stream sees no events until it is created; check Collection and Database",
			zap.String("namespace", l.missing[0]), zap.Time("since", l.since))
	case n > 1:
		l.log.Warn("watched collections do not exist: their streams see no events until they are created; check Collection and Database",
			zap.Int("count", n), zap.Strings("namespaces", l.missing[:min(n, namespaceLogListed)]))
	}
	switch n := len(l.appeared); {
	case n == 1:
		l.log.Info("the watched collection exists now", zap.String("namespace", l.appeared[0]))
	case n > 1:
		l.log.Info("watched collections exist now", zap.Int("count", n), zap.Strings("namespaces", l.appeared[:min(n, namespaceLogListed)]))
	}
	l.missing, l.appeared = nil, nil
}
