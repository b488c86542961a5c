package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/clock"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/observe"
)

// namespaceCheckEvery is how often a Collection stream's collection is looked up after the check
// at Spawn, while the stream is spawned.
const namespaceCheckEvery = time.Minute

// namespaceWatch checks that a Collection stream's collection exists: once at Spawn (on the
// caller's goroutine), then every namespaceCheckEvery on the clock's timer goroutine, never on
// an actor's. While it is missing, every check reports it (report(true, since)); the first check
// that finds it reports that once (report(false, ...)). A failed lookup (the server unreachable)
// reports nothing: the next check tries again. The Entry owns it: stop ends it, waiting for a
// check under way.
type namespaceWatch struct {
	clk    clock.Clock
	every  time.Duration
	bound  time.Duration // each periodic lookup's timeout
	exists func(ctx context.Context) (bool, error)
	report func(missing bool, since time.Time)
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
	report func(bool, time.Time), log *zap.Logger) *namespaceWatch {
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
		w.report(true, since)
	case !was.IsZero():
		w.report(false, was)
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
		names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: e.spec.Collection}})
		return len(names) > 0, err
	}
	report := func(missing bool, since time.Time) { e.reportNamespace(ns, missing, since) }
	w := newNamespaceWatch(e.rt.clk, namespaceCheckEvery, e.rt.cfg.ConnectTimeout, exists, report, e.log)
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
	}
}

// reportNamespace tells the supervisor (its status carries the warning) and, while the
// collection is missing, the Observer and the log.
func (e *Entry) reportNamespace(ns string, missing bool, since time.Time) {
	warning := ""
	if missing {
		warning = fmt.Sprintf("namespace %s does not exist (since %s): the stream sees no events until it is created; check Collection and Database",
			ns, since.UTC().Format(time.RFC3339))
		e.log.Warn("the watched collection does not exist: the stream sees no events until it is created",
			zap.String("namespace", ns), zap.Time("since", since))
		e.rt.obs.OnEvent(observe.NamespaceMissing{Meta: observe.Meta{Stream: e.name, Time: e.rt.clk.Now()}, Namespace: ns, Since: since})
	} else {
		e.log.Info("the watched collection exists now", zap.String("namespace", ns), zap.Time("missing_since", since))
	}
	if pid := e.SupervisorPID(); pid != nil {
		e.rt.sys.Root.Send(pid, &wire.NamespaceCheck{Namespace: ns, Missing: missing, Warning: warning})
	}
}
