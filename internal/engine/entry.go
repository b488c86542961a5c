package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/actors/checkpointer"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/internal/superclient"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/status"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// Entry is the runtime's record of one stream, behind its watchtree.Handle: its compiled spec,
// stores, and the supervisor's PID while its tree runs. Everything the stream does is asked of
// the supervisor with the same protobuf messages a remote console sends (internal/superclient);
// the entry keeps only the last reply, for a tree that is gone.
type Entry struct {
	rt    *Runtime
	name  string
	spec  *Spec
	log   *zap.Logger
	store *storeSet
	// records is the key of the stream's checkpoint, dead letters and gap records on this
	// instance (Spec.Records: per instance for AllInstances, shared for SingleLeader).
	records store.Scope
	// memSnapshots keeps the snapshot progress of an Ephemeral stream, which stores nothing: in
	// memory, for the life of the process (a restart of the tree resumes a copy under way; a new
	// process copies again, as it starts from the current position again).
	memSnapshots *memstore.Store
	watcher      *driverWatcher
	owned        bool // spawned by Spawn; false: Props (the user owns the supervisor actor)
	// shared: the stream reads through its hub (Spec.Shared, and sharedReason found nothing);
	// sharedWhy says why a Shared stream keeps a dedicated cursor.
	shared    bool
	sharedWhy string
	// attached: a Shared stream's current incarnation reads from the hub's cursor (its last
	// CursorChanged); false while it catches up on a cursor of its own.
	attached atomic.Bool
	// resumeSeed: Spawn saved the SingleLeader stream's start position (fixLeaderStart), so
	// the tree resumes from it whatever the StartPosition; set before the tree is built.
	resumeSeed bool

	// epoch is the fencing epoch of the SingleLeader term under way (0 for AllInstances): the
	// leader actor sets it before the stream starts, the checkpointer and the dead-letter guard
	// read it for every write.
	epoch atomic.Int64
	// validUntil is the clock.Mono reading until which the SingleLeader term under way may act
	// (the leader actor's OnValidUntil; 0 when not leading): no handler call starts after it
	// (mayStart).
	validUntil atomic.Int64

	opMu sync.Mutex // serialises stop and shutdown

	storeDB string // the records' database ("" with the user's own stores)
	// txn keeps the applied records and fences of a Transactional stream; nil otherwise.
	txn *txnRecords

	mu        sync.Mutex
	pid       *actor.PID      // the supervisor, nil while the tree is not running
	closed    bool            // runtime stopping: never spawn the tree again
	last      []byte          // the latest reply, encoded, answered once the tree is gone
	nsWatch   *namespaceWatch // the check of a Collection stream's collection (Spawn), nil when none
	lastCause error           // the latest death's cause, as reported (errors.Is works on it)
}

func newEntry(rt *Runtime, spec *Spec, st *storeSet, watchDB, storeDB string, owned bool) *Entry {
	e := &Entry{
		rt:      rt,
		name:    spec.Name,
		spec:    spec,
		log:     streamLogger(rt.log, spec.Name),
		store:   st,
		records: spec.Records(rt.cfg.InstanceName),
		watcher: newDriverWatcher(spec, rt.cfg.Client, watchDB),
		owned:   owned,
		storeDB: storeDB,
	}
	e.watcher.excludeStores(storeDB, spec.DeadLetter.Collection)
	if spec.Shared {
		e.sharedWhy = sharedReason(spec)
		e.shared = e.sharedWhy == "" && rt.hubs != nil
	}
	if spec.Transactional {
		db := rt.cfg.Client.Database(storeDB)
		e.txn = &txnRecords{
			client: rt.cfg.Client, applied: db.Collection(AppliedCollection), fences: db.Collection(FenceCollection),
			scope: e.records, lanes: spec.Lanes, leader: spec.SingleLeader, epoch: e.epoch.Load, fence: e.fence,
			ttl: spec.DeadLetter.Retention, timeout: rt.cfg.ConnectTimeout, clk: rt.clk, log: e.log, batch: spec.TxBatch,
		}
	}
	if spec.Checkpoint.Ephemeral && spec.Snapshots() {
		e.memSnapshots = memstore.New(memstore.Options{})
	}
	return e
}

// Name returns the stream's name.
func (e *Entry) Name() string { return e.name }

// Spec returns the stream's compiled spec.
func (e *Entry) Spec() *Spec { return e.spec }

// SupervisorPID returns the supervisor's PID, or nil while the tree is not running.
func (e *Entry) SupervisorPID() *actor.PID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid
}

// remember keeps r as the last reply. It keeps r's encoding, a fraction of the decoded reply
// (its transitions map, its timestamps), which every stream asked once would hold for good.
func (e *Entry) remember(r *messages.StatusReply) {
	b, err := proto.Marshal(r)
	if err != nil { // unreachable: a reply the supervisor built
		return
	}
	e.mu.Lock()
	e.last = b
	e.mu.Unlock()
}

// lastReply is the supervisor's last reply, nil when it never answered.
func (e *Entry) lastReply() *messages.StatusReply {
	e.mu.Lock()
	b := e.last
	e.mu.Unlock()
	var last messages.StatusReply
	if b == nil || proto.Unmarshal(b, &last) != nil {
		return nil
	}
	return &last
}

// ask sends msg to the supervisor and returns its StatusReply (internal/superclient: bounded by
// ctx, 5s without a deadline; a supervisor that is gone matches actor.ErrDeadLetter).
func (e *Entry) ask(ctx context.Context, pid *actor.PID, msg proto.Message) (*messages.StatusReply, error) {
	r, err := superclient.New(e.rt.sys).Ask(ctx, pid, msg)
	if err != nil {
		return nil, err
	}
	e.remember(r)
	return r, nil
}

// Status asks the supervisor for its status (one round trip, bounded by ctx; 5s without a
// deadline). When the supervisor cannot be asked (the runtime or the tree stopped) it returns
// the last reply, and nil when there was none: the supervisor is not running.
func (e *Entry) Status(ctx context.Context) (*messages.StatusReply, error) {
	if _, err := e.rt.system(); err != nil {
		return e.lastReply(), nil
	}
	pid := e.SupervisorPID()
	if pid == nil {
		return e.lastReply(), nil
	}
	r, err := e.ask(ctx, pid, &messages.StatusRequest{})
	if err != nil {
		if errors.Is(err, actor.ErrDeadLetter) { // the tree stopped meanwhile
			return e.lastReply(), nil
		}
		return nil, fmt.Errorf("watchtree: stream %q: status: %w", e.name, err)
	}
	return r, nil
}

// Command sends Start or Restart to the supervisor and waits until the stream runs, as Spawn
// does (Handle.Start, Handle.Restart).
func (e *Entry) Command(ctx context.Context, msg proto.Message) error {
	if _, err := e.rt.system(); err != nil {
		return err
	}
	pid := e.SupervisorPID()
	if pid == nil {
		return fmt.Errorf("watchtree: stream %q: its supervisor is not running: %w", e.name, ErrStopped)
	}
	if _, err := e.ask(ctx, pid, msg); err != nil {
		return fmt.Errorf("watchtree: stream %q: %w", e.name, err)
	}
	return e.awaitRunning(ctx)
}

// onTransition runs on the supervisor's goroutine: it keeps the cause of a death for Spawn's
// error. (The supervisor reports the transition's lifecycle event to the Observer itself.)
func (e *Entry) onTransition(t supervisor.Transition) {
	if t.Cause != nil && (t.To == messages.SupervisorState_SUPERVISOR_STATE_BACKOFF || t.To == messages.SupervisorState_SUPERVISOR_STATE_CRASHED) {
		e.mu.Lock()
		e.lastCause = t.Cause
		e.mu.Unlock()
	}
}

// spawnTree spawns the stream's tree under the actor system's root.
func (e *Entry) spawnTree() error {
	sys, err := e.rt.system()
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrStopped
	}
	props, err := e.treeProps()
	if err != nil {
		return err
	}
	pid, err := sys.Root.SpawnNamed(props, e.rt.prefix+"/"+e.name)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: spawn: %w", e.name, err)
	}
	e.pid = pid
	return nil
}

// awaitRunning waits until the stream's cursor is open (its start position is fixed), bounded by
// ctx (defaultSpawnTimeout without a deadline). A crashed stream fails at once with its cause.
func (e *Entry) awaitRunning(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultSpawnTimeout)
		defer cancel()
	}
	start := time.Now()
	r, err := e.ask(ctx, e.SupervisorPID(), &messages.AwaitRunning{})
	if err != nil {
		// ctx is over: ask for the state with a short budget of its own, to say where it stands.
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, serr := e.Status(sctx)
		cancel()
		if serr != nil {
			st = e.lastReply()
		}
		e.mu.Lock()
		cause := e.lastCause
		e.mu.Unlock()
		detail := "its change stream did not open"
		if cause != nil {
			detail += ": " + cause.Error()
		}
		if st != nil && statusx.StateOf(st.GetState()) == status.Backoff {
			detail += fmt.Sprintf(" (restart attempt %d pending)", st.GetAttempt())
		}
		err = fmt.Errorf("watchtree: stream %q: not running after %v: %s: %w", e.name,
			time.Since(start).Round(time.Millisecond), detail, err)
		if errors.Is(cause, ErrPoolExhausted) || (cause == nil && st != nil && poolWait(errors.New(st.GetLastCause()))) {
			err = &alsoError{err: err, also: ErrPoolExhausted}
		}
		return err
	}
	if statusx.StateOf(r.GetState()) == status.Crashed {
		e.mu.Lock()
		cause := e.lastCause
		e.mu.Unlock()
		if cause == nil {
			cause = errors.New(r.GetLastCause())
		}
		return fmt.Errorf("watchtree: stream %q: crashed while starting: %w", e.name, cause)
	}
	return nil
}

// defaultSpawnTimeout bounds Spawn's wait for the cursor when ctx has no deadline.
const defaultSpawnTimeout = 30 * time.Second

// abandon stops the tree of a Spawn that failed and frees the name.
func (e *Entry) abandon() {
	e.stopNamespaceWatch()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	e.mu.Lock()
	pid := e.pid
	e.pid, e.closed = nil, true
	e.mu.Unlock()
	if pid != nil {
		ctx, cancel := context.WithTimeout(context.Background(), e.rt.cfg.ShutdownTimeout)
		defer cancel()
		if err := stopActor(ctx, e.rt.sys, pid); err != nil {
			e.log.Warn("abandoned stream tree did not stop", zap.Error(err))
		}
	}
	if e.txn != nil {
		e.txn.close(context.Background())
	}
	e.rt.unregister(e)
}

// trackPID is the receiver middleware of a Props-built supervisor: it records the supervisor's
// PID while the actor lives, so Handle, Stop and Status reach a tree the user spawned.
func (e *Entry) trackPID(next actor.ReceiverFunc) actor.ReceiverFunc {
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

// Stop is Handle.Stop: a graceful Stop request to the supervisor, bounded by ctx and
// ShutdownTimeout; the tree stays, stopped.
func (e *Entry) Stop(ctx context.Context, why string) error {
	if _, err := e.rt.system(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.rt.cfg.ShutdownTimeout)
	defer cancel()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	return e.gracefulStop(ctx, why)
}

// gracefulStop asks the supervisor to run its stop sequence and turns its report into an error.
// The supervisor gets nine tenths of the time left (superclient.StopBudget), so that its report
// (naming the step that held the stop up) arrives before ctx ends.
func (e *Entry) gracefulStop(ctx context.Context, why string) error {
	pid := e.SupervisorPID()
	if pid == nil {
		return nil
	}
	r, err := e.ask(ctx, pid, superclient.New(e.rt.sys).GracefulStop(ctx, why))
	if err != nil {
		if errors.Is(err, actor.ErrDeadLetter) {
			return nil // the tree is gone already
		}
		return fmt.Errorf("watchtree: stream %q: stop: %w", e.name, err)
	}
	ls := statusx.Read(r, e.Local()).LastStop
	switch {
	case !ls.Failed():
		return nil
	case ls.TimedOut():
		return fmt.Errorf("watchtree: stream %q: stop held up by the %s: %s: %w", e.name, ls.HeldUpBy,
			ls.Error, context.DeadlineExceeded)
	default:
		return fmt.Errorf("watchtree: stream %q: stop: %s", e.name, ls.Error)
	}
}

// shutdown is a stream's part of Runtime.Stop: the graceful stop, then the supervisor actor and
// its children stop, also for a tree spawned through Props (its stores and Observer go away with
// the runtime, so it must not be started again). The entry is closed: never spawned again.
func (e *Entry) shutdown(ctx context.Context, why string) error {
	e.stopNamespaceWatch()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	e.mu.Lock()
	e.closed = true
	pid := e.pid
	e.mu.Unlock()
	if e.txn != nil {
		defer e.txn.close(context.WithoutCancel(ctx)) // once the tree is gone: its lanes used them
	}
	if pid == nil {
		return nil
	}
	err := e.gracefulStop(ctx, why)
	if serr := stopActor(ctx, e.rt.sys, pid); serr != nil {
		err = errors.Join(err, fmt.Errorf("watchtree: stream %q: stop the supervisor: %w", e.name, serr))
	}
	e.mu.Lock()
	if e.pid != nil && e.pid.Equal(pid) {
		e.pid = nil
	}
	e.mu.Unlock()
	return err
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

// setValidUntil records the leader actor's OnValidUntil (0: not leading).
func (e *Entry) setValidUntil(mono time.Duration) { e.validUntil.Store(int64(mono)) }

// mayStart is the dispatcher's MayStart of a SingleLeader stream: a handler call starts only
// before the term's validity ends, both read on the runtime clock's monotonic reading
// (clock.Mono), so that a leader paused past its lease starts nothing before its timers catch
// up, and a jump of the clock's wall time extends no term. nil for an AllInstances stream.
func (e *Entry) mayStart() func(mono time.Duration) bool {
	if !e.spec.SingleLeader {
		return nil
	}
	return func(mono time.Duration) bool {
		t := e.validUntil.Load()
		return t != 0 && int64(mono) < t
	}
}

// SharedWhy says why a stream that asked for Cursor Shared keeps a dedicated cursor ("" when
// it shares, is Dedicated, or keeps one by default: CursorMode says why then).
func (e *Entry) SharedWhy() string {
	if !e.spec.SharedAsked {
		return ""
	}
	return e.sharedWhy
}

// Local is what this instance knows of the stream besides its supervisor's status, for
// statusx.Read: the Handle's and the console's status read it alike. A Shared stream that keeps
// a dedicated cursor carries a warning saying why.
func (e *Entry) Local() statusx.Local {
	l := statusx.Local{Name: e.name, Mode: e.spec.Mode(), Cursor: e.CursorMode()}
	if why := e.SharedWhy(); why != "" {
		l.Warnings = []string{"Cursor Shared: the stream reads on a dedicated cursor: " + why}
	}
	return l
}

// CursorMode names the stream's cursor: "dedicated", "shared (attached)" or "shared (catching
// up)", or "dedicated (<why>)" for a Shared stream that cannot share (StreamStatus.Cursor, the
// console's streams).
func (e *Entry) CursorMode() string {
	switch {
	case e.shared && e.attached.Load():
		return "shared (attached)"
	case e.shared:
		return "shared (catching up)"
	case e.sharedWhy != "":
		return "dedicated (" + e.sharedWhy + ")"
	}
	return "dedicated"
}

// positions is the checkpointer's PositionSource: a Shared stream's captures take a catch-up
// token (hub.go), so that many starting together stay within the connection budget.
func (e *Entry) positions() checkpointer.PositionSource {
	if e.shared {
		return sharedPositions{w: e.watcher, set: e.rt.hubs}
	}
	return e.watcher
}

// streamWatcher is the stream actor's Watcher: the stream's bounded driver watcher, or, for a
// Shared stream, its hub's members.
func (e *Entry) streamWatcher() stream.Watcher {
	w := e.watcher.bounded(e.rt.cfg.ConnectTimeout)
	if !e.shared {
		return w
	}
	return sharedWatcher{set: e.rt.hubs, key: keyOf(e.spec, e.watcher.Client, e.watcher.Database), coll: e.spec.Collection,
		catchUp: w, log: e.log, report: e.cursorChanged}
}

// cursorChanged records and reports a Shared stream's move to or from the hub's cursor
// (observe.CursorChanged); the member calls it on the stream's reader goroutine. With no why it
// only records: a new incarnation's member starts catching up, which is no change to report.
func (e *Entry) cursorChanged(attached bool, why string) {
	e.attached.Store(attached)
	if why == "" {
		return
	}
	ev := observe.CursorChanged{Meta: observe.Meta{Stream: e.name, Time: e.rt.clk.Now()}, Attached: attached, Why: why}
	if attached {
		e.log.Debug(ev.String())
	} else {
		e.log.Info(ev.String())
	}
	e.rt.obs.OnEvent(ev)
}
