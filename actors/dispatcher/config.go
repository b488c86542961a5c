package dispatcher

import (
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
)

// Defaults of Config: DefaultConfig is their one source (see there); the constants name the
// values other packages need at compile time.
const (
	defaultLanes = 1
	// DefaultCapacity is the default Config.Capacity.
	DefaultCapacity            = 4096
	defaultSettleBatch         = 1024
	defaultSettleFlushInterval = 50 * time.Millisecond
	defaultDrainTimeout        = 30 * time.Second
	defaultStopTimeout         = 10 * time.Second
	defaultDeadLetterTimeout   = 30 * time.Second

	// maxLanes is the largest Config.Lanes accepted (watchtree's Stream.Lanes bound too).
	maxLanes = treekit.MaxLanes
	// maxCapacity is the largest Config.Capacity accepted (credit travels as uint32).
	maxCapacity = 1 << 24
)

// DefaultConfig returns the defaults of every Config field that has a value default: the one
// source of them. New fills each zero field of the Config it is given from it (so a zero field
// means exactly this value, and the field docs state it), and the runtime builds its
// dispatchers from it, so that no other layer holds a default of its own that could silently
// override this one (TestActorDefaults checks that New's filling equals DefaultConfig). The
// dependencies (Clock, Rand, Logger, Observer) are not values: nil means the real clock,
// math/rand/v2, no log and no events, as their docs say.
func DefaultConfig() Config {
	return Config{
		Lanes:               defaultLanes,
		Capacity:            DefaultCapacity,
		Retry:               policyx.WithDefaults(policy.Retry{}),
		DeadLetterTimeout:   defaultDeadLetterTimeout,
		CheckpointerName:    treekit.CheckpointerName,
		SettleBatch:         defaultSettleBatch,
		SettleFlushInterval: defaultSettleFlushInterval,
		DrainTimeout:        defaultDrainTimeout,
		StopTimeout:         defaultStopTimeout,
	}
}

// Config configures one dispatcher. Stream and Router are required; every other zero field
// means its documented default.
type Config struct {
	// Stream is the stream name: every log line carries it (field "stream") and every dead
	// letter records it. Required.
	Stream string
	// Instance is recorded with every dead letter next to Stream: an AllInstances stream's
	// instance name, so that each instance keeps, lists and replays its own; empty for the
	// stream's shared scope (SingleLeader). The root decides it from the stream's mode.
	Instance string
	// Router decodes events and calls the user's handlers. Required. It is called from all lanes
	// concurrently.
	Router Router
	// Lanes is the number of lane goroutines. Events with the same documentKey always go to the
	// same lane and are processed there in order; different keys run in parallel. An event
	// without a documentKey (drop, rename, dropDatabase, invalidate) is a barrier: it starts once
	// every earlier event settled, and later events start once it settled. With 1 lane
	// processing is strictly sequential. Default 1, at most 1,024.
	Lanes int
	// Capacity bounds the events accepted (or granted as credit) and not yet settled; memory is
	// bounded by it whatever the handler speed. Default 4096 (four cursor batches: the next
	// batches are read while the lanes work on this one), at most 2^24 (16,777,216). The memory
	// this holds is at most Capacity events, and never more than Capacity/1024 + 1 server
	// replies (16 MiB each at most) with the cursor's batches of 1024.
	Capacity int
	// Retry governs handler retries and the spacing of dead-letter write retries: the stream's
	// watchtree.RetryPolicy, converted. See watchtree.RetryPolicy for the fields, defaults and
	// formula; the jitter draws from Rand.
	Retry policy.Retry
	// DeadLetters stores events whose attempts ran out or whose error is permanent. The event
	// settles (OUTCOME_DEAD_LETTERED) only after PutDeadLetter succeeded; a failing write is
	// retried forever with the Retry delays, the lane stays blocked on that event, nothing is
	// skipped. nil disables dead letters: such an event is logged at ERROR, reported
	// (DeadLettered with Dropped set) and settles as OUTCOME_DEAD_LETTERED without a record.
	DeadLetters DeadLetterWriter
	// DeadLetterRetention sets DeadLetter.ExpiresAt = CreatedAt + DeadLetterRetention. 0 means
	// the records never expire (the root passes its 14-day default). Must be >= 0.
	DeadLetterRetention time.Duration
	// DeadLetterTimeout bounds one PutDeadLetter call (a context deadline, wall clock). Default
	// 30s. Must be >= 0.
	DeadLetterTimeout time.Duration
	// AwaitSettleLimit makes the dispatcher grant no credit after it attaches to the checkpointer
	// (AttachDispatcher: on start, and on every Subscribe of a newer incarnation, so that a
	// restarted checkpointer learns of it) until the checkpointer answered with a FlowControl
	// carrying a settle_limit. The root sets it: the checkpointer bounds the settled events no
	// successful checkpoint write covers by MaxUnflushed through that limit, which must hold from
	// the first event on. Default false: a settle_limit is honoured once one arrives.
	AwaitSettleLimit bool
	// Checkpointer receives Progress and SettledBatch. Default: the sibling actor named
	// CheckpointerName under the dispatcher's parent (the stream supervisor). An
	// AttachCheckpointer message replaces it.
	Checkpointer *actor.PID
	// CheckpointerName is the sibling name used when Checkpointer is nil. Default
	// "checkpointer".
	CheckpointerName string
	// SettleBatch is the largest SettledBatch sent to the checkpointer, and the number of
	// settlements at which a busy lane wakes the actor. Default 1,024 (a change-stream batch).
	// Must be >= 0.
	SettleBatch int
	// SettleFlushInterval bounds how long a settled event waits before it is sent while other
	// events are still in flight (when nothing is in flight, settlements are sent at once).
	// Default 50ms, on Clock. Must be >= 0.
	SettleFlushInterval time.Duration
	// DrainTimeout bounds a Drain that does not carry its own timeout. Default 30s, on Clock.
	// Must be >= 0.
	DrainTimeout time.Duration
	// StopTimeout bounds how long stopping or restarting the dispatcher waits for the lane
	// goroutines after cancelling their context (a handler that ignores its context keeps its
	// goroutine alive past it; that is logged). Default 10s, on Clock. Must be >= 0.
	StopTimeout time.Duration
	// Clock schedules retries and flushes. Default clock.Real().
	Clock clock.Clock
	// Rand returns uniform floats in [0, 1) for the retry jitter. It is called from every lane,
	// so it must be safe for concurrent use. Default math/rand/v2.Float64.
	Rand func() float64
	// Logger receives the dispatcher's log lines, each with the field stream=<Stream>. Default
	// zap.NewNop().
	Logger *zap.Logger
	// Observer receives the events the dispatcher reports (observe.RetryScheduled, Skipped,
	// DeadLettered, DeadLetterFailed), built here with Meta{Stream, Clock.Now()}. It is called
	// from the lane goroutines, several at a time, so it must be safe for concurrent use and
	// must not block (the root passes its queue); a panic in it is recovered and logged, it
	// never breaks a lane. Default observe.Nop.
	Observer observe.Observer
	// MayStart, when set, is asked before every handler attempt (on the lane goroutine, with
	// Clock's monotonic reading, clock.Mono(Clock): a lease's validity must not move when the
	// wall time jumps); false withholds the call as a cancelled context does: the event stays
	// unsettled, and the lane waits for the dispatcher's restart. A SingleLeader stream passes
	// its lease's validity (leader.Config.OnValidUntil), so that a leader whose process was
	// paused past its lease starts nothing before it notices. It must be cheap and safe for
	// concurrent use. Optional: nil always allows.
	MayStart func(mono time.Duration) bool
}

// validate checks c. The error names the field and the rule ("dispatcher: Config.Lanes must be
// ..."; the Retry rules are configerr.Error values on "Config.Retry.<Field>"); several broken
// rules are joined with errors.Join.
func (c Config) validate() error {
	e := treekit.NewConfigErrors("dispatcher", c.Stream)
	if c.Router == nil {
		e.Add("Router", "must not be nil")
	}
	if c.Lanes < 0 || c.Lanes > maxLanes {
		e.Add("Lanes", "must be between 1 and %d (0 means the default %d), got %d", maxLanes, defaultLanes, c.Lanes)
	}
	if c.Capacity < 0 || c.Capacity > maxCapacity {
		e.Add("Capacity", "must be between 1 and %d (0 means the default %d), got %d", maxCapacity, DefaultCapacity, c.Capacity)
	}
	e.Policies(func(pe *configcheck.Errors) { policyx.ValidateInto(pe, "Retry", c.Retry) })
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"DeadLetterRetention", c.DeadLetterRetention},
		{"DeadLetterTimeout", c.DeadLetterTimeout},
		{"SettleFlushInterval", c.SettleFlushInterval},
		{"DrainTimeout", c.DrainTimeout},
		{"StopTimeout", c.StopTimeout},
	} {
		if d.v < 0 {
			e.Add(d.field, "must be >= 0 (0 means the default), got %v", d.v)
		}
	}
	if c.SettleBatch < 0 {
		e.Add("SettleBatch", "must be >= 1 (0 means the default %d), got %d", defaultSettleBatch, c.SettleBatch)
	}
	return e.Err()
}

// withDefaults returns c with every zero field replaced by its default: DefaultConfig's value
// (a partly set Retry is filled field by field, from the same policy defaults DefaultConfig
// uses).
func (c Config) withDefaults() Config {
	c.Retry = policyx.WithDefaults(c.Retry)
	treekit.FillZero(&c, DefaultConfig())
	treekit.FillRand(&c.Rand)
	treekit.Defaults(c.Stream, &c.Clock, &c.Logger, &c.Observer)
	return c
}

// New validates cfg and returns the props of the dispatcher actor. Spawn it as a sibling of the
// stream actor (the supervisor's Config.Siblings, after the checkpointer). Each instance starts
// its own lanes; a restarted instance starts afresh (its unsettled events are redelivered by the
// stream's next incarnation).
func New(cfg Config) (*actor.Props, error) {
	return treekit.New(cfg, Config.validate, Config.withDefaults, newDispatcher)
}
