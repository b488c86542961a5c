package snapshot

import (
	"context"
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/store"
)

// Defaults of Config; DefaultConfig is their one source.
const (
	defaultProgressInterval = time.Second
	defaultIOTimeout        = treekit.DefaultIOTimeout
	// defaultWindowCheckEvery is how many progress intervals pass between two reads of the
	// oplog window.
	defaultWindowCheckEvery = 30
)

// DefaultConfig returns the defaults of every Config field that has a value default: the one
// source of them. New fills each zero field of the Config it is given from it (a partly set
// Policy field by field, from the same policy defaults), and the runtime builds its snapshot
// actors from it, so that no other layer holds a default of its own that could silently
// override this one (TestActorDefaults checks that New's filling equals DefaultConfig). The
// dependencies (Clock, Logger, Observer) are not values: nil means the real clock, no log and
// no events.
func DefaultConfig() Config {
	return Config{
		Policy:           policyx.WithDefaults(policy.Snapshot{}),
		Dispatcher:       treekit.DispatcherName,
		Checkpointer:     treekit.CheckpointerName,
		ProgressInterval: defaultProgressInterval,
		WindowCheckEvery: defaultWindowCheckEvery,
		IOTimeout:        defaultIOTimeout,
	}
}

// Source reads the watched collection. The root implements it with the driver, applying the
// snapshot's Filter to every call. Its methods are called from the actor's worker and range
// goroutines, with contexts cancelled when the run ends.
type Source interface {
	// Plan returns the number of matching documents and at most parts-1 split points, each a
	// document {_id: value}, strictly ascending: the ranges are [nil, s1), [s1, s2), ...,
	// [sk, nil). An empty collection has no split points. A collection whose _id values mix
	// BSON types fails with an error wrapping streamtree.ErrMixedIDTypes (a range query on _id
	// compares values of one type only): the actor escalates it as a terminal failure.
	Plan(ctx context.Context, parts int) (total uint64, splits []bson.Raw, err error)
	// Read returns up to limit matching documents with min <= _id < max and _id > after, in
	// _id order (min, max and after are {_id: value} documents; nil means unbounded).
	Read(ctx context.Context, min, max, after bson.Raw, limit int) ([]bson.Raw, error)
	// Watch opens a change stream of the watched namespace, with the stream's pipeline, that
	// resumes after token: the snapshot reads it, without consuming events, to move the handoff
	// position forward while the collection stays idle.
	Watch(ctx context.Context, token bson.Raw) (IdleCursor, error)
	// OplogWindow returns the wall times of the oldest and the newest oplog entries; ok is false
	// when the oplog cannot be read (no permission, a simulator without it).
	OplogWindow(ctx context.Context) (first, last time.Time, ok bool)
}

// IdleCursor is the part of a change stream the handoff keeper reads (stream.Cursor has it).
type IdleCursor interface {
	// TryNext returns true when an event is available (after at most one getMore).
	TryNext(ctx context.Context) bool
	// ResumeToken is the post-batch resume token after an empty getMore.
	ResumeToken() bson.Raw
	// Err is the cursor's error after TryNext returned false, nil when it simply had no event.
	Err() error
	// Close kills the cursor on the server.
	Close(ctx context.Context) error
}

// Config configures the snapshot actor of one stream.
type Config struct {
	// Stream is the stream name. Required.
	Stream string
	// Instance is the instance part of the snapshot record's scope (store.Scope): the instance
	// name for an AllInstances stream, each instance copying for itself; empty for the shared
	// record of a SingleLeader stream.
	Instance string
	// Database and Collection are the watched namespace: the ns of every snapshot event.
	// Required.
	Database, Collection string
	// Store keeps the snapshot record. Required.
	Store store.SnapshotStore
	// Source reads the collection. Required.
	Source Source
	// Policy is the stream's snapshot policy (Partitions and BatchSize are used here; the
	// Filter is applied by the Source). Zero fields mean the policy defaults.
	Policy policy.Snapshot
	// Checkpointer is the name of the checkpointer sibling, told of handoff positions that moved
	// forward (AdvanceHandoff). Default "checkpointer"; CheckpointerPID, when set, is used
	// instead.
	Checkpointer    string
	CheckpointerPID *actor.PID
	// Dispatcher is the name of the dispatcher sibling. Default "dispatcher"; DispatcherPID,
	// when set, is used instead.
	Dispatcher    string
	DispatcherPID *actor.PID
	// ProgressInterval is how often the progress is saved (besides the end of every chunk),
	// reported to the supervisor (SnapshotStatus) and to the Observer (SnapshotProgress). Default 1s, on Clock.
	ProgressInterval time.Duration
	// WindowCheckEvery is how many progress intervals pass between two reads of the oplog
	// window (it is also read before the first document). Default 30.
	WindowCheckEvery int
	// IOTimeout bounds each store call and each Source call (a context deadline, wall clock).
	// Default 10s.
	IOTimeout time.Duration
	// Clock stamps progress and drives the intervals. Default clock.Real().
	Clock clock.Clock
	// Logger receives the log lines, with field stream=<Stream>. Default zap.NewNop().
	Logger *zap.Logger
	// Observer receives the snapshot's milestones (observe.SnapshotStarted, SnapshotResumed,
	// SnapshotProgress every ProgressInterval and when the handoff becomes at risk,
	// SnapshotDone), built here with Meta{Stream, Clock.Now()}, on the actor goroutine. It must
	// not block (the root passes its queue); a panic in it is recovered and logged. Default
	// observe.Nop.
	Observer observe.Observer
}

// validate checks c; the error names each broken field.
func (c Config) validate() error {
	e := treekit.NewConfigErrors("snapshot", c.Stream)
	if c.Database == "" || c.Collection == "" {
		e.Add("Collection", "and Database must not be empty (a snapshot reads one collection)")
	}
	if c.Store == nil {
		e.Add("Store", "must not be nil")
	}
	if c.Source == nil {
		e.Add("Source", "must not be nil")
	}
	e.Policies(func(pe *configcheck.Errors) { policyx.ValidateInto(pe, "Policy", c.Policy) })
	treekit.NotNegative(e, "ProgressInterval", c.ProgressInterval, defaultProgressInterval)
	treekit.NotNegative(e, "WindowCheckEvery", c.WindowCheckEvery, defaultWindowCheckEvery)
	treekit.NotNegative(e, "IOTimeout", c.IOTimeout, defaultIOTimeout)
	return e.Err()
}

func (c Config) withDefaults() Config {
	c.Policy = policyx.WithDefaults(c.Policy)
	treekit.FillZero(&c, DefaultConfig())
	treekit.Defaults(c.Stream, &c.Clock, &c.Logger, &c.Observer)
	return c
}

// New validates cfg and returns the props of the snapshot actor; the supervisor spawns it as a
// sibling named "snapshot".
func New(cfg Config) (*actor.Props, error) {
	return treekit.New(cfg, Config.validate, Config.withDefaults, func(c *Config) actor.Actor { return newActor(*c) })
}
