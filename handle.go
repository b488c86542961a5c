package watchtree

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/actors/supervisor"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/streamstatus"
	"github.com/watchtree/watchtree/internal/superclient"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/memstore"
)

// StreamState is the lifecycle state of a stream, as its supervisor reports it.
type StreamState string

// The states of a stream, as its supervisor reports them.
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
	// StateStopping: a graceful stop is under way (cursor closed, dispatcher draining, final
	// checkpoint being written); stopped follows.
	StateStopping StreamState = "stopping"
	// StateSnapshotting: the start position is fixed (persisted) and a snapshot copies the
	// existing documents through the handlers (StreamStatus.Snapshot); running follows, from that
	// position.
	StateSnapshotting StreamState = "snapshotting"
)

// StreamStatus is a snapshot of one stream, as its supervisor reports it: the Go view of the
// supervisor's StatusReply message, which the Handle and the remote console share.
type StreamStatus struct {
	// Name is the stream's Name; Mode its deployment mode.
	Name string
	Mode Mode
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
	// Incarnation numbers the stream actor's (re)starts since the tree was spawned, from 1.
	Incarnation uint64
	// Deaths and Restarts count deaths of the stream actor and restarts carried out by the
	// RestartPolicy since the tree was spawned.
	Deaths, Restarts uint64
	// Checkpoint is the resume token of the latest checkpoint written since the tree was spawned
	// (nil when none was written yet, or for a position that is an operation time),
	// CheckpointSource its source ("event", "pbrt", "initial", ...) and CheckpointAt when it was
	// written; time.Since(CheckpointAt) is the checkpoint age. The checkpointer reports its
	// writes at most every 100ms (the newest one of a faster run), so the status may be that much
	// behind the store; a Flush's write and the last write before a stop are reported at once.
	Checkpoint       bson.Raw
	CheckpointSource string
	CheckpointAt     time.Time
	// Settled counts the events settled since the tree was spawned, by outcome:
	// Handled + Filtered + Unhandled + Skipped + DeadLettered = Settled (DeadLettered includes
	// the events dropped with dead letters disabled). The dispatcher reports them at most every
	// 100ms, so the counts lag by at most 150ms (the report interval and a 50ms settlement
	// flush); a graceful stop reports them at once.
	Settled, Handled, Filtered, Unhandled, Skipped, DeadLettered uint64
	// LastStop reports the latest graceful stop; nil when the stream was never stopped.
	LastStop *StopReport
	// Snapshot is the progress of the stream's latest snapshot since the tree was spawned; nil
	// when none ran. Snapshot documents are not counted in Settled and the outcomes above.
	Snapshot *observe.SnapshotStatus
	// OnDemand is the progress of the latest on-demand snapshot (Handle.Snapshot) since the tree
	// was spawned; nil when none ran. Its documents are not counted in Settled either.
	OnDemand *observe.SnapshotStatus
	// InFlight counts the events the dispatcher accepted and has not settled, as of its latest
	// report (at most every 100ms while events settle, and whenever the read position moved).
	InFlight uint64
	// ReadThrough is the cluster time of the newest position the stream has read: the last
	// event's, or that of an empty batch's post-batch resume token (the cursor is caught up to
	// it). time.Since(ReadThrough) is the stream's lag. Zero before the first batch.
	ReadThrough time.Time
	// Lease is the SingleLeader lease as this instance sees it; nil for AllInstances streams.
	Lease *LeaseStatus
}

// Lease roles of LeaseStatus.Role.
const (
	// RoleLeader: this instance holds the lease and runs the stream.
	RoleLeader = "leader"
	// RoleStandby: another instance holds the lease (or it could not be read); this one waits.
	RoleStandby = "standby"
	// RoleIdle: this instance does not campaign (the stream is stopped or crashed here).
	RoleIdle = "idle"
)

// LeaseStatus is a SingleLeader stream's lease as this instance sees it.
type LeaseStatus struct {
	// Role is RoleLeader, RoleStandby or RoleIdle.
	Role string
	// Instance is this instance's ID (Config.InstanceID); Owner the lease holder as last seen
	// ("" when free or unknown).
	Instance, Owner string
	// Epoch is the lease epoch as last seen (this instance's own when leader); ExpiresAt its
	// expiry (lease store clock).
	Epoch     int64
	ExpiresAt time.Time
	// Why is the one-line reason of the role.
	Why string
	// Acquisitions, Losses, HandOvers and Fenced count this instance's leaderships won, lost,
	// handed over for balance, and writes refused by a newer epoch, since the tree was spawned.
	Acquisitions, Losses, HandOvers, Fenced uint64
}

// StopReport tells how a graceful stop went.
type StopReport struct {
	// Settled and Unsettled are the dispatcher's counts when its drain ended; unsettled events
	// are redelivered on the next start.
	Settled, Unsettled uint64
	// LowWaterMark is the highest sequence number the final checkpoint covers.
	LowWaterMark uint64
	// Drained and Flushed report whether the drain and the final checkpoint write completed.
	Drained, Flushed bool
	// Fenced reports a final write refused because another instance holds a newer lease epoch.
	Fenced bool
	// HeldUpBy names the first step that did not finish in time ("stream actor stop", "drain",
	// "checkpoint flush"); Skipped the steps left out because their actor had failed; Error the
	// first error of the sequence. All are empty after a clean stop.
	HeldUpBy, Skipped, Error string
	// Took is how long the stop sequence ran.
	Took time.Duration
}

// statusOf converts the supervisor's reply, as internal/streamstatus reads it (the console reads
// it there too).
func statusOf(r *messages.StatusReply) StreamStatus {
	s := streamstatus.Read(r)
	st := StreamStatus{
		Name: s.Stream, State: StreamState(s.State), Why: s.Why, Since: s.Since,
		Attempt: s.Attempt, MaxAttempts: s.MaxAttempts, NextRetryAt: s.NextRetryAt, LastCause: s.LastCause,
		Incarnation: s.Incarnation, Deaths: s.Deaths, Restarts: s.Restarts,
		Settled: s.Settled.Settled, Handled: s.Settled.Handled, Filtered: s.Settled.Filtered,
		Unhandled: s.Settled.Unhandled, Skipped: s.Settled.Skipped, DeadLettered: s.Settled.DeadLettered,
		InFlight: s.InFlight, ReadThrough: s.ReadThrough,
	}
	if cp := s.Checkpoint; cp != nil {
		st.Checkpoint, st.CheckpointSource, st.CheckpointAt = cp.Token, cp.Source, cp.WrittenAt
	}
	if l := s.Lease; l != nil {
		st.Lease = &LeaseStatus{Role: l.Role, Instance: l.Instance, Owner: l.Holder, Epoch: l.Epoch, ExpiresAt: l.ExpiresAt,
			Why: l.Why, Acquisitions: l.Acquisitions, Losses: l.Losses, HandOvers: l.HandOvers, Fenced: l.Fenced}
	}
	if ls := s.LastStop; ls != nil {
		st.LastStop = &StopReport{
			Settled: ls.Settled, Unsettled: ls.Unsettled, LowWaterMark: ls.LowWaterMark,
			Drained: ls.Drained, Flushed: ls.Flushed, Fenced: ls.Fenced,
			HeldUpBy: ls.HeldUpBy, Skipped: ls.Skipped, Error: ls.Error, Took: ls.Took,
		}
	}
	if sn := r.GetSnapshot(); sn != nil {
		p := snapshot.StatusOf(sn)
		st.Snapshot = &p
	}
	if sn := r.GetOnDemand(); sn != nil {
		p := snapshot.StatusOf(sn)
		st.OnDemand = &p
	}
	return st
}

// Handle controls one spawned stream. It is safe for concurrent use.
type Handle struct{ e *streamEntry }

// Name returns the stream's Name.
func (h *Handle) Name() string { return h.e.name }

// Status asks the stream's supervisor for its current status (one actor round trip, bounded
// by ctx; 5s when ctx has no deadline). Once the runtime has stopped, it returns the last
// status the supervisor reported.
func (h *Handle) Status(ctx context.Context) (StreamStatus, error) { return h.e.status(ctx) }

// Stop stops the stream gracefully and waits for it, bounded by ctx and Config.ShutdownTimeout
// (the earlier). The stream's supervisor runs the sequence: the stream actor stops (its cursor
// is closed, no more events are read), the dispatcher drains (in-flight events finish, retries
// and dead-letter writes included, and settle; later ones are left for the next start), and the
// checkpointer writes the final position. Nothing settled before the stop is redelivered after
// it. The stream stays registered in state stopped; Start resumes it from that position.
// Stopping a stopped stream returns nil. A SingleLeader stream then releases its lease, so a
// standby instance takes over at once, from that position.
//
// The same sequence runs for a stream spawned through Props, and for a Stop message sent to
// the supervisor by any other actor. When a step does not finish in time, Stop returns an error
// matching context.DeadlineExceeded that names the step (Status().LastStop has the details);
// the events left unsettled are redelivered on the next start.
func (h *Handle) Stop(ctx context.Context) error { return h.e.stop(ctx, "handle") }

// Start starts a stopped or crashed stream and, like Spawn, returns once its cursor is open
// (bounded by ctx; 30s without a deadline): it resumes after its checkpoint (Latest and At
// start positions apply to the first start after Spawn only). Starting a stream that is up
// (starting, running, backoff) is a no-op, except that during backoff the pending restart
// happens now (an operator start wins over the RestartPolicy's delay) and the attempt counter
// resets. During a graceful stop it is ignored: start again once Stop returned. A stream that
// crashes while starting returns its cause; one still in backoff when ctx ends returns an error
// naming the last cause, and its RestartPolicy goes on. A SingleLeader stream campaigns for its
// lease: Start returns once it runs (it acquired the lease) or is in standby (another instance
// leads).
func (h *Handle) Start(ctx context.Context) error {
	return h.e.command(ctx, &messages.Start{Reason: "handle"})
}

// Restart closes the stream's cursor and opens a new one, and resets the attempt counter. A
// stream that is up restarts gracefully, as Stop does (the dispatcher drains, the final
// checkpoint is written; a SingleLeader stream keeps its lease), and the new cursor resumes
// from that checkpoint: nothing handled before the restart is delivered again. An event still
// unsettled after the stop timeout (30s) is redelivered. A stream in backoff, stopped or
// crashed is started at once. Restart returns once the new cursor is open, as Start does
// (bounded by ctx; 30s without a deadline); during a graceful stop it is ignored.
func (h *Handle) Restart(ctx context.Context) error {
	return h.e.command(ctx, &messages.Restart{Reason: "handle"})
}

// streamEntry is the runtime's record of one stream: its compiled spec, stores, and the
// supervisor's PID while its tree runs. Everything the stream does is asked of the supervisor
// with the same protobuf messages a remote console sends; the entry keeps only the last reply,
// for a tree that is gone.
type streamEntry struct {
	rt    *Runtime
	name  string
	cs    *engine.Spec
	log   *zap.Logger
	store *engine.StoreSet
	// records is the key of the stream's checkpoint, dead letters and gap records on this
	// instance (recordScope: per instance for AllInstances, shared for SingleLeader).
	records store.Scope
	// memSnapshots keeps the snapshot progress of an Ephemeral stream, which stores nothing: in
	// memory, for the life of the process (a restart of the tree resumes a copy under way; a new
	// process copies again, as it starts from the current position again).
	memSnapshots *memstore.Store
	watcher      *engine.Watcher
	owned        bool // spawned by Spawn; false: Props (the user owns the supervisor actor)
	handle       *Handle

	// epoch is the fencing epoch of the SingleLeader term under way (0 for AllInstances): the
	// leader actor sets it before the stream starts, the checkpointer and the dead-letter guard
	// read it for every write.
	epoch epochHolder

	opMu sync.Mutex // serialises stop and shutdown

	storeDB string // the records' database ("" with the user's own stores)

	mu        sync.Mutex
	pid       *actor.PID // the supervisor, nil while the tree is not running
	closed    bool       // runtime stopping: never spawn the tree again
	last      []byte     // the latest reply, encoded, answered once the tree is gone
	lastCause error      // the latest death's cause, as reported (errors.Is works on it)
}

func newStreamEntry(rt *Runtime, cs *engine.Spec, st *engine.StoreSet, watchDB, storeDB string, owned bool) *streamEntry {
	e := &streamEntry{
		rt:      rt,
		name:    cs.Name,
		cs:      cs,
		log:     engine.StreamLogger(rt.log, cs.Name),
		store:   st,
		records: cs.Records(rt.cfg.InstanceName),
		watcher: engine.NewWatcher(cs, rt.cfg.Client, watchDB),
		owned:   owned,
		storeDB: storeDB,
	}
	e.watcher.ExcludeStores(storeDB, cs.DeadLetter.Collection)
	if cs.Checkpoint.Ephemeral && cs.Snapshots() {
		e.memSnapshots = memstore.New(memstore.Options{})
	}
	e.handle = &Handle{e: e}
	return e
}

// supervisorPID returns the supervisor's PID, or nil.
func (e *streamEntry) supervisorPID() *actor.PID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid
}

// remember keeps r as the last reply. It keeps r's encoding, a fraction of the decoded reply
// (its transitions map, its timestamps), which every stream asked once would hold for good.
func (e *streamEntry) remember(r *messages.StatusReply) {
	b, err := proto.Marshal(r)
	if err != nil { // unreachable: a reply the supervisor built
		return
	}
	e.mu.Lock()
	e.last = b
	e.mu.Unlock()
}

// lastStatus is the status when the supervisor cannot be asked.
func (e *streamEntry) lastStatus() StreamStatus {
	e.mu.Lock()
	b := e.last
	e.mu.Unlock()
	var last messages.StatusReply
	if b == nil || proto.Unmarshal(b, &last) != nil {
		return StreamStatus{Name: e.name, Mode: modeOf(e.cs), State: StateStopped, Why: "the stream's supervisor is not running"}
	}
	st := statusOf(&last)
	st.Mode = modeOf(e.cs)
	return st
}

// ask sends msg to the supervisor and returns its StatusReply (internal/superclient: bounded by
// ctx, 5s without a deadline; a supervisor that is gone matches actor.ErrDeadLetter).
func (e *streamEntry) ask(ctx context.Context, pid *actor.PID, msg proto.Message) (*messages.StatusReply, error) {
	r, err := superclient.New(e.rt.sys).Ask(ctx, pid, msg)
	if err != nil {
		return nil, err
	}
	e.remember(r)
	return r, nil
}

func (e *streamEntry) status(ctx context.Context) (StreamStatus, error) {
	if _, err := e.rt.system(); err != nil {
		return e.lastStatus(), nil
	}
	pid := e.supervisorPID()
	if pid == nil {
		return e.lastStatus(), nil
	}
	r, err := e.ask(ctx, pid, &messages.StatusRequest{})
	if err != nil {
		if errors.Is(err, actor.ErrDeadLetter) { // the tree stopped meanwhile
			return e.lastStatus(), nil
		}
		return StreamStatus{}, fmt.Errorf("watchtree: stream %q: status: %w", e.name, err)
	}
	st := statusOf(r)
	st.Mode = modeOf(e.cs)
	return st, nil
}

// command sends Start or Restart to the supervisor.
func (e *streamEntry) command(ctx context.Context, msg proto.Message) error {
	if _, err := e.rt.system(); err != nil {
		return err
	}
	pid := e.supervisorPID()
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
func (e *streamEntry) onTransition(t supervisor.Transition) {
	if t.Cause != nil && (t.To == supervisor.StateBackoff || t.To == supervisor.StateCrashed) {
		e.mu.Lock()
		e.lastCause = t.Cause
		e.mu.Unlock()
	}
}

// spawnTree spawns the stream's tree under the actor system's root.
func (e *streamEntry) spawnTree() error {
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
func (e *streamEntry) awaitRunning(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultSpawnTimeout)
		defer cancel()
	}
	start := time.Now()
	r, err := e.ask(ctx, e.supervisorPID(), &messages.AwaitRunning{})
	if err != nil {
		// ctx is over: ask for the state with a short budget of its own, to say where it stands.
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, serr := e.status(sctx)
		cancel()
		if serr != nil {
			st = e.lastStatus()
		}
		e.mu.Lock()
		cause := e.lastCause
		e.mu.Unlock()
		detail := "its change stream did not open"
		if cause != nil {
			detail += ": " + cause.Error()
		}
		if st.State == StateBackoff {
			detail += fmt.Sprintf(" (restart attempt %d pending)", st.Attempt)
		}
		return fmt.Errorf("watchtree: stream %q: not running after %v: %s: %w", e.name,
			time.Since(start).Round(time.Millisecond), detail, err)
	}
	if streamstatus.StateName(r.GetState()) == streamstatus.Crashed {
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
func (e *streamEntry) abandon() {
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
	e.rt.unregister(e)
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

// stop is Handle.Stop: a graceful Stop request to the supervisor; the tree stays, stopped.
func (e *streamEntry) stop(ctx context.Context, why string) error {
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
func (e *streamEntry) gracefulStop(ctx context.Context, why string) error {
	pid := e.supervisorPID()
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
	ls := streamstatus.Read(r).LastStop
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
func (e *streamEntry) shutdown(ctx context.Context, why string) error {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	e.mu.Lock()
	e.closed = true
	pid := e.pid
	e.mu.Unlock()
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
