package watchtree

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/engine"
)

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
// A SingleLeader stream's tree also has a leader actor. Before the tree starts, Spawn opens the
// stream's change stream once (a pipeline the server refuses fails Spawn on every instance,
// standby or not) and, when the stream has no checkpoint yet, saves the captured position as its
// checkpoint, which whoever leads first resumes from. Spawn then returns once the stream runs
// (this instance acquired the lease) or is in standby after the lease store answered (another
// instance holds the lease, or the store failed): in both cases the position is fixed, and every
// write committed after Spawn returned is delivered by whichever instance leads.
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
	cs, err := compileSpec(spec)
	if err != nil {
		return nil, err
	}
	e, err := rt.e.Spawn(ctx, cs)
	if err != nil {
		return nil, err
	}
	return &Handle{e: e}, nil
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
	cs, err := compileSpec(spec)
	if err != nil {
		return nil, err
	}
	return rt.e.Props(cs)
}

// compileSpec validates spec (which must not be nil) and compiles it for the engine.
func compileSpec(spec Spec) (*engine.Spec, error) {
	if spec == nil {
		return nil, &ConfigError{Field: "Spec", Rule: "must not be nil"}
	}
	return spec.compile()
}
