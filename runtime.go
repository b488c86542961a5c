package watchtree

import (
	"context"

	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/statusx"
)

// Runtime runs stream trees: one supervisor per stream, with its checkpointer, dispatcher and
// stream actor. Create it with New, start it with Start, add streams with Spawn (or
// Props), and stop everything with Stop. All methods are safe for concurrent use.
//
// Lifecycle: New validates and does no I/O; Start creates (or joins) the actor system and
// prepares the stores; Spawn needs a started runtime; Stop is final (a stopped runtime cannot be
// started again: create a new one, which resumes every stream from its checkpoint).
type Runtime struct {
	cfg Config          // validated and defaulted
	e   *engine.Runtime // the registry, the trees, the stores, the Observer's queue, the console
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
	return &Runtime{cfg: cfg, e: engine.New(cfg.engine())}, nil
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
	return rt.e.Start(ctx)
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
	return rt.e.Stop(ctx)
}

// Streams asks every stream's supervisor for its status, in parallel, each bounded by ctx (5s
// when ctx has no deadline), and returns them sorted by name. A stream whose supervisor did not
// answer is left out and named in the error; the others are returned all the same. After Stop
// it returns each stream's last reported status.
func (rt *Runtime) Streams(ctx context.Context) ([]StreamStatus, error) {
	sts, err := rt.e.Streams(ctx)
	out := make([]StreamStatus, len(sts))
	for i, st := range sts {
		out[i] = statusx.Read(st.Reply, st.Entry.Local())
	}
	return out, err
}

// Handle returns the handle of a spawned stream (also one spawned through Props), or an error
// matching ErrUnknownStream.
func (rt *Runtime) Handle(name string) (*Handle, error) {
	e, err := rt.e.Entry(name)
	if err != nil {
		return nil, err
	}
	return &Handle{e: e}, nil
}
