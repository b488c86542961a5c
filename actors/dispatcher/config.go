package dispatcher

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/backoff"
	"github.com/watchtree/watchtree/internal/clock"
)

// Defaults of Config and RetryPolicy.
const (
	DefaultLanes               = 1
	DefaultCapacity            = 1024
	DefaultSettleBatch         = 256
	DefaultSettleFlushInterval = 50 * time.Millisecond
	DefaultDrainTimeout        = 30 * time.Second
	DefaultStopTimeout         = 10 * time.Second
	DefaultDeadLetterTimeout   = 30 * time.Second
	DefaultCheckpointerName    = "checkpointer"

	DefaultRetryMaxAttempts  = 3
	DefaultRetryInitialDelay = 500 * time.Millisecond
	DefaultRetryMaxDelay     = 30 * time.Second
	DefaultRetryMultiplier   = 2.0

	// MaxLanes is the largest Config.Lanes accepted.
	MaxLanes = 1024
	// MaxCapacity is the largest Config.Capacity accepted (credit travels as uint32).
	MaxCapacity = 1 << 24
)

// RetryPolicy decides how often the handler is called for one event and how long the event's
// lane waits between calls (the root maps watchtree.RetryPolicy onto it). The zero value is the
// default: 3 attempts, 500ms, 1s, with jitter.
//
// After the n-th failed attempt (n = 1, 2, ...) the lane waits
//
//	delay(n) = min(InitialDelay × Multiplier^(n-1), MaxDelay) × (0.8 + 0.4 × Config.Rand())
//
// floored at 1ms when jittered; without jitter the factor is 1. The same formula spaces the
// retries of a failing dead-letter write (attempt n = the n-th failed write, unbounded).
type RetryPolicy struct {
	// MaxAttempts is the number of handler calls per event, including the first. Default 3;
	// 1 means no retry. Must be >= 0 (0 means the default).
	MaxAttempts int
	// InitialDelay is the delay after the first failed attempt. Default 500ms. Must be >= 0
	// (0 means the default).
	InitialDelay time.Duration
	// MaxDelay caps the delay before jitter. Default 30s. Must be >= 0 (0 means the default)
	// and, once defaulted, >= InitialDelay.
	MaxDelay time.Duration
	// Multiplier is the growth factor between consecutive delays. Default 2. Must be finite and
	// >= 1 (0 means the default).
	Multiplier float64
	// DisableJitter turns the ±20% jitter off.
	DisableJitter bool
}

// WithDefaults returns p with every zero field replaced by its default.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultRetryMaxAttempts
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = DefaultRetryInitialDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultRetryMaxDelay
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultRetryMultiplier
	}
	return p
}

// validate appends the broken rules of p, with field names prefixed by "Config.Retry.".
func (p RetryPolicy) validate(errs []error) []error {
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("dispatcher: Config.Retry.%s "+format, append([]any{field}, args...)...))
	}
	if p.MaxAttempts < 0 {
		bad("MaxAttempts", "must be >= 1 (0 means the default %d), got %d", DefaultRetryMaxAttempts, p.MaxAttempts)
	}
	delaysOK := true
	if p.InitialDelay < 0 {
		bad("InitialDelay", "must be > 0 (0 means the default %v), got %v", DefaultRetryInitialDelay, p.InitialDelay)
		delaysOK = false
	}
	if p.MaxDelay < 0 {
		bad("MaxDelay", "must be > 0 (0 means the default %v), got %v", DefaultRetryMaxDelay, p.MaxDelay)
		delaysOK = false
	}
	if math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) || (p.Multiplier != 0 && p.Multiplier < 1) {
		bad("Multiplier", "must be finite and >= 1 (0 means the default %v), got %v", DefaultRetryMultiplier, p.Multiplier)
	}
	if d := p.WithDefaults(); delaysOK && d.MaxDelay < d.InitialDelay {
		bad("MaxDelay", "must be >= InitialDelay (%v), got %v", d.InitialDelay, d.MaxDelay)
	}
	return errs
}

// Delay returns the delay after the attempt-th failed attempt (1-based; below 1 counts as 1) of
// the defaulted policy. rnd returns a uniform float in [0, 1) for the jitter (nil:
// math/rand/v2.Float64). A huge exponent gives MaxDelay; the result never overflows.
func (p RetryPolicy) Delay(attempt int, rnd func() float64) time.Duration {
	p = p.WithDefaults()
	d := backoff.Delay(p.InitialDelay, p.MaxDelay, p.Multiplier, attempt)
	if p.DisableJitter {
		return d
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return backoff.Jitter(d, rnd())
}

// Config configures one dispatcher. Stream and Router are required; every other zero field
// means its documented default.
type Config struct {
	// Stream is the stream name: every log line carries it (field "stream") and every dead
	// letter records it. Required.
	Stream string
	// Router decodes events and calls the user's handlers. Required. It is called from all lanes
	// concurrently.
	Router Router
	// Lanes is the number of lane goroutines. Events with the same documentKey always go to the
	// same lane and are processed there in order; different keys run in parallel. An event
	// without a documentKey (drop, rename, dropDatabase, invalidate) is a barrier: it starts once
	// every earlier event settled, and later events start once it settled. With 1 lane
	// processing is strictly sequential. Default 1, at most MaxLanes.
	Lanes int
	// Capacity bounds the events accepted (or granted as credit) and not yet settled; memory is
	// bounded by it whatever the handler speed. Default 1024, at most MaxCapacity.
	Capacity int
	// Retry governs handler retries and the spacing of dead-letter write retries.
	Retry RetryPolicy
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
	// DefaultCheckpointerName ("checkpointer").
	CheckpointerName string
	// SettleBatch is the largest SettledBatch sent to the checkpointer. Default 256. Must be >= 0.
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
	// Events receives typed reports (retries, dead letters, skips, panics, counters). Default:
	// none. See Events for the calling rules.
	Events Events
}

// Validate checks c. The error names the field and the rule ("dispatcher: Config.Lanes must be
// ..."); several broken rules are joined with errors.Join.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("dispatcher: Config.%s "+format, append([]any{field}, args...)...))
	}
	if c.Stream == "" {
		bad("Stream", "must not be empty")
	}
	if c.Router == nil {
		bad("Router", "must not be nil")
	}
	if c.Lanes < 0 || c.Lanes > MaxLanes {
		bad("Lanes", "must be between 1 and %d (0 means the default %d), got %d", MaxLanes, DefaultLanes, c.Lanes)
	}
	if c.Capacity < 0 || c.Capacity > MaxCapacity {
		bad("Capacity", "must be between 1 and %d (0 means the default %d), got %d", MaxCapacity, DefaultCapacity, c.Capacity)
	}
	errs = c.Retry.validate(errs)
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
			bad(d.field, "must be >= 0 (0 means the default), got %v", d.v)
		}
	}
	if c.SettleBatch < 0 {
		bad("SettleBatch", "must be >= 1 (0 means the default %d), got %d", DefaultSettleBatch, c.SettleBatch)
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.Lanes == 0 {
		c.Lanes = DefaultLanes
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	c.Retry = c.Retry.WithDefaults()
	if c.DeadLetterTimeout == 0 {
		c.DeadLetterTimeout = DefaultDeadLetterTimeout
	}
	if c.CheckpointerName == "" {
		c.CheckpointerName = DefaultCheckpointerName
	}
	if c.SettleBatch == 0 {
		c.SettleBatch = DefaultSettleBatch
	}
	if c.SettleFlushInterval == 0 {
		c.SettleFlushInterval = DefaultSettleFlushInterval
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Logger = c.Logger.With(zap.String("stream", c.Stream))
	if c.Events == nil {
		c.Events = NopEvents{}
	}
	return c
}

// New validates cfg and returns the props of the dispatcher actor. Spawn it as a sibling of the
// stream actor (the supervisor's Config.Siblings, after the checkpointer). Each instance starts
// its own lanes; a restarted instance starts afresh (its unsettled events are redelivered by the
// stream's next incarnation).
func New(cfg Config) (*actor.Props, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return actor.PropsFromProducer(func() actor.Actor { return newDispatcher(cfg) }), nil
}
