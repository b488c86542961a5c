package checkpointer

import (
	"context"
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/backoff"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// Defaults of the zero Config fields; DefaultConfig is their one source (those of
// Config.Checkpoint are policy.Checkpoint's).
const (
	// defaultRetryInitialDelay is the default Config.RetryInitialDelay.
	defaultRetryInitialDelay = 100 * time.Millisecond
	// defaultRetryMaxDelay is the default Config.RetryMaxDelay.
	defaultRetryMaxDelay = 30 * time.Second
	// defaultIOTimeout is the default Config.IOTimeout.
	defaultIOTimeout = treekit.DefaultIOTimeout
)

// DefaultConfig returns the defaults of every Config field that has a value default: the one
// source of them. New fills each zero field of the Config it is given from it (a partly set
// Checkpoint field by field, from the same policy defaults), and the runtime builds its
// checkpointers from it, so that no other layer holds a default of its own that could silently
// override this one (TestActorDefaults checks that New's filling equals DefaultConfig). Two
// defaults depend on other fields and are applied by New alone: RetryMaxDelay is at least
// RetryInitialDelay, and with Snapshot.Mode SnapshotWhenNeeded OnHistoryLost Fail means
// RebuildFromSnapshot. The dependencies (Epoch, Clock, Logger, Observer) are not values: nil
// means epoch 0, the real clock, no log and no events, as their docs say.
func DefaultConfig() Config {
	return Config{
		Checkpoint:        policyx.WithDefaults(policy.Checkpoint{}),
		RetryInitialDelay: defaultRetryInitialDelay,
		RetryMaxDelay:     defaultRetryMaxDelay,
		IOTimeout:         defaultIOTimeout,
	}
}

// Store is the part of store.CheckpointStore the checkpointer calls (see there for the
// guarantees). Calls run on the checkpointer's own I/O goroutine, one at a time, with a context
// that is cancelled when the checkpointer stops or restarts.
type Store interface {
	// Load: see store.CheckpointStore.Load.
	Load(ctx context.Context, scope store.Scope) (store.Checkpoint, bool, error)
	// Save: see store.CheckpointStore.Save.
	Save(ctx context.Context, cp store.Checkpoint) error
}

// GapRecorder is the part of store.GapStore the checkpointer calls (see there): it retries a
// failed RecordGap before it moves past the gap.
type GapRecorder interface {
	// RecordGap: see store.GapStore.RecordGap.
	RecordGap(ctx context.Context, g store.Gap) error
}

// The store interfaces satisfy the subsets.
var (
	_ Store       = store.CheckpointStore(nil)
	_ GapRecorder = store.GapStore(nil)
)

// PositionSource captures the current position of the watched namespace: the root implements it
// by opening a change stream and reading its initial post-batch resume token, and the operation
// time of that reply. Calls run on the checkpointer's I/O goroutine.
type PositionSource interface {
	// Current returns the post-batch resume token of a new change stream and the operation time
	// of that reply; an error (unreachable server, ctx done) fails the start, which is retried.
	Current(ctx context.Context) (token bson.Raw, opTime bson.Timestamp, err error)
}

// Config configures the checkpointer of one stream. Stream, Store and Positions are required
// (Gaps too when OnHistoryLost is not Fail); every other zero field means its default.
type Config struct {
	// Stream is the stream name: the checkpoint's key and the "stream" field of every log line.
	// Required.
	Stream string
	// Instance is the instance part of the key of the checkpoint and the gap records: an
	// AllInstances stream's instance name, so that each instance resumes from its own
	// position only; empty for the stream's shared position (SingleLeader). The root decides
	// it from the stream's mode. With an Instance, a start that finds no checkpoint of its own
	// takes the shared checkpoint of an earlier version's layout, once, as its starting point
	// (see the package documentation), and every write carries ExpiresAt = UpdatedAt +
	// Checkpoint.Retention.
	Instance string
	// Store loads and saves the checkpoint. Required.
	Store Store
	// Gaps records gaps. Required unless OnHistoryLost is Fail.
	Gaps GapRecorder
	// Positions captures the current position (first start, Latest, history lost). Required.
	Positions PositionSource
	// StartPosition is the first start's position (the stream's watchtree.StartPosition, as it
	// is). Default Resume. Latest and At apply only until one start of the tree succeeded;
	// every later start, including one of a restarted checkpointer, resumes from the checkpoint.
	StartPosition policy.StartPosition
	// OnHistoryLost is the policy for a start position that is no longer in the oplog (the
	// stream's watchtree.HistoryLostPolicy, as it is). Default Fail. Fail answers StartFrom{FAIL,
	// terminal} and escalates a terminal failure wrapping streamtree.ErrHistoryLost and TerminalErr;
	// ResumeFromNow and Rebuild record the gap (retried until written) and persist the new
	// position before answering; a failing Rebuild function answers a transient FAIL.
	OnHistoryLost policy.HistoryLost
	// Snapshot is the stream's snapshot policy (watchtree.SnapshotPolicy, as it is); only its
	// Mode matters here. With SnapshotInitial or SnapshotWhenNeeded, a start that finds no
	// checkpoint captures the position, creates a snapshot record (Snapshots) and then persists
	// the position (source "snapshot"), and its StartFrom names the snapshot (snapshot_id): the
	// stream actor runs it before it opens the change stream. A start that finds a running
	// snapshot record names it again, so an interrupted snapshot resumes. With
	// SnapshotWhenNeeded, OnHistoryLost Fail (the zero value) means RebuildFromSnapshot.
	Snapshot policy.Snapshot
	// Snapshots keeps the snapshot records. Required when Snapshot.Mode is not SnapshotNever
	// or OnHistoryLost is RebuildFromSnapshot.
	Snapshots store.SnapshotStore
	// Checkpoint says when the position is written (the stream's watchtree.CheckpointPolicy,
	// converted); watchtree.CheckpointPolicy documents the fields and their defaults. MaxUnflushed bounds the
	// settlements not covered by a successful write, the events still in flight in the
	// dispatcher included: the checkpointer's FlowControl.settle_limit lets the dispatcher take
	// and grant only so many events (see the package documentation).
	Checkpoint policy.Checkpoint
	// RetryInitialDelay and RetryMaxDelay shape the backoff of failed checkpoint and gap writes:
	// the n-th consecutive failure is retried after min(RetryInitialDelay × 2^(n-1),
	// RetryMaxDelay), without jitter. Defaults 100ms and 30s (or RetryInitialDelay when that is
	// longer). Must be >= 0 (0 = default), RetryMaxDelay >= RetryInitialDelay.
	RetryInitialDelay time.Duration
	RetryMaxDelay     time.Duration
	// IOTimeout bounds each call to Store, Gaps and Positions (a context deadline, wall clock;
	// the Rebuild function is not bounded). A call still running when it passes fails with an
	// error matching context.DeadlineExceeded and takes that call's failure path: a transient
	// FAIL answer to the start request, a retried checkpoint or gap write. Without it an
	// unreachable server holds the checkpointer for the MongoDB driver's server selection
	// timeout (30s by default) per call. Default 10s. Must be >= 0 (0 = default).
	IOTimeout time.Duration
	// Admit, when set, is called before each call to Store (Load and Save), with the context of
	// the worker (cancelled when the checkpointer stops or restarts), and release once the call
	// returned: a runtime bounds the store calls of all its checkpointers with it. IOTimeout
	// starts after admission, so a queue of final writes at shutdown waits its turn instead of
	// timing out in the queue. An error (the context ended) fails the call. Nil: no bound.
	Admit func(ctx context.Context) (release func(), err error)
	// Epoch returns the fencing epoch written with every checkpoint (SingleLeader: the lease
	// epoch). It is called on the actor goroutine for each write and must not block. Default: 0.
	Epoch func() int64
	// Owner is the instance id written with every checkpoint (informational).
	Owner string
	// Dispatcher receives FlowControl when known at spawn time; AttachDispatcher (a message)
	// sets or replaces it. Optional.
	Dispatcher *actor.PID
	// Clock schedules the save interval and retries. Default clock.Real().
	Clock clock.Clock
	// Logger receives the log lines, each with the field stream=<Stream>. Default zap.NewNop().
	Logger *zap.Logger
	// Observer receives the events the checkpointer reports (observe.Checkpointed,
	// CheckpointFailed, HistoryLost, GapRecorded), built here with Meta{Stream, Clock.Now()}, on
	// the actor goroutine. It must not block (the root passes its queue); a panic in it is
	// recovered and logged. Default observe.Nop.
	Observer observe.Observer
}

// validate checks the configuration. The error names the field (Config.<Field>; the rules of
// StartPosition, OnHistoryLost and Checkpoint are the policies' own, reported as
// *configerr.Error); several broken rules are joined.
func (c Config) validate() error {
	e := treekit.NewConfigErrors("checkpointer", c.Stream)
	if c.Store == nil {
		e.Add("Store", "must not be nil")
	}
	if c.Positions == nil {
		e.Add("Positions", "must not be nil")
	}
	if c.Gaps == nil && (policyx.HistoryLostKindOf(c.OnHistoryLost) != policyx.HistoryFail || c.Snapshot.Mode == policy.SnapshotWhenNeeded) {
		e.Add("Gaps", "must not be nil when OnHistoryLost is %v", c.OnHistoryLost)
	}
	if c.Snapshots == nil && (policyx.SnapshotEnabled(c.Snapshot) || policyx.HistoryLostKindOf(c.OnHistoryLost) == policyx.HistoryRebuildFromSnapshot) {
		e.Add("Snapshots", "must not be nil when Snapshot.Mode is %v or OnHistoryLost is %v", c.Snapshot.Mode, c.OnHistoryLost)
	}
	e.Policies(func(pe *configcheck.Errors) {
		policyx.ValidateInto(pe, "StartPosition", c.StartPosition)
		policyx.ValidateInto(pe, "OnHistoryLost", c.OnHistoryLost)
		policyx.ValidateInto(pe, "Checkpoint", c.Checkpoint)
		policyx.ValidateStartInto(pe, "StartPosition", c.Checkpoint, c.StartPosition)
	})
	treekit.NotNegative(e, "IOTimeout", c.IOTimeout, defaultIOTimeout)
	initialOK := treekit.NotNegative(e, "RetryInitialDelay", c.RetryInitialDelay, defaultRetryInitialDelay)
	maxOK := treekit.NotNegative(e, "RetryMaxDelay", c.RetryMaxDelay, defaultRetryMaxDelay)
	if initialOK && maxOK {
		d := c.withDefaults()
		if d.RetryMaxDelay < d.RetryInitialDelay {
			e.Add("RetryMaxDelay", "must be >= RetryInitialDelay (%v), got %v", d.RetryInitialDelay, d.RetryMaxDelay)
		}
	}
	return e.Err()
}

// withDefaults fills the zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	c.Checkpoint = policyx.WithDefaults(c.Checkpoint)
	if c.Snapshot.Mode == policy.SnapshotWhenNeeded && policyx.HistoryLostKindOf(c.OnHistoryLost) == policyx.HistoryFail {
		c.OnHistoryLost = policy.RebuildFromSnapshot
	}
	d := DefaultConfig()
	treekit.Fill(&c.RetryInitialDelay, d.RetryInitialDelay)
	treekit.Fill(&c.RetryMaxDelay, max(d.RetryMaxDelay, c.RetryInitialDelay))
	treekit.Fill(&c.IOTimeout, d.IOTimeout)
	if c.Epoch == nil {
		c.Epoch = func() int64 { return 0 }
	}
	treekit.Defaults(c.Stream, &c.Clock, &c.Logger, &c.Observer)
	return c
}

// retryDelay returns the delay before retrying after the n-th consecutive failure (n >= 1):
// min(RetryInitialDelay × 2^(n-1), RetryMaxDelay), the policies' backoff formula without jitter.
func (c Config) retryDelay(n int) time.Duration {
	return backoff.Delay(c.RetryInitialDelay, c.RetryMaxDelay, 2, n)
}
