package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/clock"
	"github.com/watchtree/watchtree/store"
)

// Defaults of the zero Config fields.
const (
	// DefaultSaveEvery is the default Config.SaveEvery (settlements per write).
	DefaultSaveEvery = 100
	// DefaultSaveInterval is the default Config.SaveInterval.
	DefaultSaveInterval = time.Second
	// DefaultIdleSaveInterval is the default Config.IdleSaveInterval.
	DefaultIdleSaveInterval = 5 * time.Minute
	// DefaultMaxUnflushedFactor gives the default Config.MaxUnflushed = factor × SaveEvery.
	DefaultMaxUnflushedFactor = 100
	// DefaultRetryInitialDelay is the default Config.RetryInitialDelay.
	DefaultRetryInitialDelay = 100 * time.Millisecond
	// DefaultRetryMaxDelay is the default Config.RetryMaxDelay.
	DefaultRetryMaxDelay = 30 * time.Second
)

// Store loads and saves a stream's checkpoint. store/memstore and store/mongostore implement
// it. Calls run on the checkpointer's own I/O goroutine, one at a time, with a context that is
// cancelled when the checkpointer stops or restarts.
type Store interface {
	// Load returns the stream's checkpoint, and false when there is none.
	Load(ctx context.Context, stream string) (store.Checkpoint, bool, error)
	// Save upserts cp, conditional on its epoch: it fails with an error matching
	// store.ErrFenced when the stored Epoch is higher.
	Save(ctx context.Context, cp store.Checkpoint) error
}

// GapRecorder durably records a gap (history skipped on purpose). A second call with the same
// Gap.ID overwrites the first, so retries never duplicate.
type GapRecorder interface {
	RecordGap(ctx context.Context, g store.Gap) error
}

// PositionSource captures the current position of the watched namespace: the root implements it
// by opening a change stream and reading its initial post-batch resume token, and the operation
// time of that reply. Calls run on the checkpointer's I/O goroutine.
type PositionSource interface {
	Current(ctx context.Context) (token bson.Raw, opTime bson.Timestamp, err error)
}

// StartPosition says where the stream tree starts reading on its first start. Build it with
// Resume (the zero value), Latest or At. Latest and At apply only until one start of the tree
// succeeded (a position was resolved and persisted); every later start, including a restart of
// the checkpointer itself, resumes from the checkpoint written since.
type StartPosition struct {
	kind startKind
	at   time.Time
}

type startKind uint8

const (
	startResume startKind = iota
	startLatest
	startAt
)

// Resume resumes after the saved checkpoint; with no checkpoint it captures the current position
// and persists it before replying.
var Resume = StartPosition{}

// Latest ignores a saved checkpoint (logged at WARN) and captures the current position,
// persisted before replying.
var Latest = StartPosition{kind: startLatest}

// At ignores a saved checkpoint (logged at WARN) and starts at operation time t, truncated to the
// second (startAtOperationTime has second precision). The position is persisted (a Checkpoint
// with no Token and ClusterTime t) before replying. t must be non-zero and between 1970 and 2106.
func At(t time.Time) StartPosition { return StartPosition{kind: startAt, at: t} }

func (p StartPosition) opTime() bson.Timestamp { return bson.Timestamp{T: uint32(p.at.Unix())} }

// String returns "Resume", "Latest" or "At(<RFC 3339>)".
func (p StartPosition) String() string {
	switch p.kind {
	case startLatest:
		return "Latest"
	case startAt:
		return "At(" + p.at.UTC().Format(time.RFC3339) + ")"
	}
	return "Resume"
}

// HistoryLostPolicy is what the checkpointer does when the stream actor reports that its start
// position is no longer in the oplog. Build it with Fail (the zero value), ResumeFromNow or
// Rebuild.
type HistoryLostPolicy struct {
	kind    historyKind
	rebuild func(ctx context.Context) error
}

type historyKind uint8

const (
	historyFail historyKind = iota
	historyResumeFromNow
	historyRebuild
)

// Fail answers StartFrom{FAIL, terminal} and escalates a terminal failure wrapping
// ErrHistoryLost and Config.TerminalErr, so that the supervisor gives up.
var Fail = HistoryLostPolicy{}

// ResumeFromNow captures the current position, records the gap durably (retried until it
// succeeds), persists the position (Source "resumeFromNow") and answers RESUME_AFTER it.
var ResumeFromNow = HistoryLostPolicy{kind: historyResumeFromNow}

// Rebuild captures the current operation time T, runs fn on the checkpointer's I/O goroutine
// (ctx is cancelled when the checkpointer stops or restarts), records the gap, persists T (Source
// "rebuild") and answers START_AT_OPERATION_TIME T. When fn fails the answer is a transient
// FAIL: the supervisor restarts the stream later, the start position is lost again and fn runs
// again. fn must not be nil.
func Rebuild(fn func(ctx context.Context) error) HistoryLostPolicy {
	return HistoryLostPolicy{kind: historyRebuild, rebuild: fn}
}

// String returns "Fail", "ResumeFromNow" or "Rebuild".
func (p HistoryLostPolicy) String() string {
	switch p.kind {
	case historyResumeFromNow:
		return "ResumeFromNow"
	case historyRebuild:
		return "Rebuild"
	}
	return "Fail"
}

// Config configures the checkpointer of one stream. Stream, Store and Positions are required
// (Gaps too when OnHistoryLost is not Fail); every other zero field means its default.
type Config struct {
	// Stream is the stream name: the checkpoint's key and the "stream" field of every log line.
	// Required.
	Stream string
	// Store loads and saves the checkpoint. Required.
	Store Store
	// Gaps records gaps. Required unless OnHistoryLost is Fail.
	Gaps GapRecorder
	// Positions captures the current position (first start, Latest, history lost). Required.
	Positions PositionSource
	// StartPosition is the first start's position. Default Resume.
	StartPosition StartPosition
	// OnHistoryLost is the policy for a start position that is no longer in the oplog. Default
	// Fail.
	OnHistoryLost HistoryLostPolicy
	// SaveEvery is the number of settlements since the last write that triggers a write.
	// Default DefaultSaveEvery (100). Must be >= 0 (0 = default).
	SaveEvery int
	// SaveInterval is the maximum age of an unwritten position change after events settled: such
	// a position is written at most SaveInterval after its first unwritten change. (An idle
	// stream's moving PBRT waits IdleSaveInterval instead.) Default DefaultSaveInterval (1s).
	// Must be >= 0 (0 = default).
	SaveInterval time.Duration
	// IdleSaveInterval is how long a position change that is only a moved PBRT (no event settled
	// since the last write) waits before it is written. It keeps idle streams inside the oplog
	// window without a write per SaveInterval: every checkpoint write is itself an oplog entry
	// that moves every other stream's PBRT, so a short period would make idle streams write
	// each other's checkpoints forever. Default DefaultIdleSaveInterval (5 minutes; oplog
	// windows are hours). Must be >= 0 (0 means the default).
	IdleSaveInterval time.Duration
	// MaxUnflushed bounds the settlements not covered by a successful write, the events still
	// in flight in the dispatcher included: the checkpointer's FlowControl.settle_limit lets the
	// dispatcher take and grant only so many events (see the package documentation). When it is
	// reached while the store fails, FlowControl{paused: true} reports it; FlowControl{paused:
	// false} follows the next successful write. Default DefaultMaxUnflushedFactor × SaveEvery.
	// Must be >= 0 (0 = default) and >= SaveEvery.
	MaxUnflushed int
	// RetryInitialDelay and RetryMaxDelay shape the backoff of failed checkpoint and gap writes:
	// the n-th consecutive failure is retried after min(RetryInitialDelay × 2^(n-1),
	// RetryMaxDelay). Defaults DefaultRetryInitialDelay (100ms) and DefaultRetryMaxDelay (30s).
	// Must be >= 0 (0 = default), RetryMaxDelay >= RetryInitialDelay.
	RetryInitialDelay time.Duration
	RetryMaxDelay     time.Duration
	// Epoch returns the fencing epoch written with every checkpoint (SINGLE_LEADER: the lease
	// epoch). It is called on the actor goroutine for each write and must not block. Default: 0.
	Epoch func() int64
	// Owner is the instance id written with every checkpoint (informational).
	Owner string
	// TerminalErr is wrapped, together with ErrHistoryLost or ErrFenced, into the terminal
	// failures the checkpointer escalates (history lost under Fail, a fenced write), so that the
	// supervisor's classifier recognises them. Optional (the package sentinels are always
	// wrapped).
	TerminalErr error
	// Dispatcher receives FlowControl when known at spawn time; AttachDispatcher (a message)
	// sets or replaces it. Optional.
	Dispatcher *actor.PID
	// Clock schedules the save interval and retries. Default clock.Real().
	Clock clock.Clock
	// Logger receives the log lines, each with the field stream=<Stream>. Default zap.NewNop().
	Logger *zap.Logger
	// Events receives the checkpointer's events, on the actor goroutine. Default NopEvents.
	Events Events
}

// Validate checks the configuration. The error names the field (Config.<Field>); several broken
// rules are joined.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("checkpointer: Config.%s %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Stream == "" {
		add("Stream", "must not be empty")
	}
	if c.Store == nil {
		add("Store", "must not be nil")
	}
	if c.Positions == nil {
		add("Positions", "must not be nil")
	}
	if c.Gaps == nil && c.OnHistoryLost.kind != historyFail {
		add("Gaps", "must not be nil when OnHistoryLost is %v", c.OnHistoryLost)
	}
	if c.OnHistoryLost.kind == historyRebuild && c.OnHistoryLost.rebuild == nil {
		add("OnHistoryLost", "Rebuild needs a non-nil function")
	}
	if c.OnHistoryLost.kind > historyRebuild {
		add("OnHistoryLost", "is unknown (%d)", c.OnHistoryLost.kind)
	}
	switch c.StartPosition.kind {
	case startResume, startLatest:
	case startAt:
		if t := c.StartPosition.at; t.IsZero() {
			add("StartPosition", "At needs a non-zero time")
		} else if t.Unix() < 0 || t.Unix() > math.MaxUint32 {
			add("StartPosition", "At needs a time between 1970 and 2106, got %s", t.UTC().Format(time.RFC3339))
		}
	default:
		add("StartPosition", "is unknown (%d)", c.StartPosition.kind)
	}
	countsOK := true
	if c.SaveEvery < 0 {
		add("SaveEvery", "must be >= 0 (0 means %d), got %d", DefaultSaveEvery, c.SaveEvery)
		countsOK = false
	}
	if c.MaxUnflushed < 0 {
		add("MaxUnflushed", "must be >= 0 (0 means %d × SaveEvery), got %d", DefaultMaxUnflushedFactor, c.MaxUnflushed)
		countsOK = false
	}
	if countsOK {
		d := c.withDefaults()
		if d.MaxUnflushed < d.SaveEvery {
			add("MaxUnflushed", "must be >= SaveEvery (%d), got %d", d.SaveEvery, d.MaxUnflushed)
		}
	}
	if c.IdleSaveInterval < 0 {
		add("IdleSaveInterval", "must be >= 0 (0 means %v), got %v", DefaultIdleSaveInterval, c.IdleSaveInterval)
	}
	if c.SaveInterval < 0 {
		add("SaveInterval", "must be >= 0 (0 means %v), got %v", DefaultSaveInterval, c.SaveInterval)
	}
	delaysOK := true
	if c.RetryInitialDelay < 0 {
		add("RetryInitialDelay", "must be >= 0 (0 means %v), got %v", DefaultRetryInitialDelay, c.RetryInitialDelay)
		delaysOK = false
	}
	if c.RetryMaxDelay < 0 {
		add("RetryMaxDelay", "must be >= 0 (0 means %v), got %v", DefaultRetryMaxDelay, c.RetryMaxDelay)
		delaysOK = false
	}
	if delaysOK {
		d := c.withDefaults()
		if d.RetryMaxDelay < d.RetryInitialDelay {
			add("RetryMaxDelay", "must be >= RetryInitialDelay (%v), got %v", d.RetryInitialDelay, d.RetryMaxDelay)
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields (except Logger's stream field, added by New).
func (c Config) withDefaults() Config {
	if c.SaveEvery == 0 {
		c.SaveEvery = DefaultSaveEvery
	}
	if c.IdleSaveInterval == 0 {
		c.IdleSaveInterval = DefaultIdleSaveInterval
	}
	if c.SaveInterval == 0 {
		c.SaveInterval = DefaultSaveInterval
	}
	if c.MaxUnflushed == 0 {
		if c.SaveEvery > math.MaxInt/DefaultMaxUnflushedFactor {
			c.MaxUnflushed = math.MaxInt
		} else {
			c.MaxUnflushed = c.SaveEvery * DefaultMaxUnflushedFactor
		}
	}
	if c.RetryInitialDelay == 0 {
		c.RetryInitialDelay = DefaultRetryInitialDelay
	}
	if c.RetryMaxDelay == 0 {
		c.RetryMaxDelay = max(DefaultRetryMaxDelay, c.RetryInitialDelay)
	}
	if c.Epoch == nil {
		c.Epoch = func() int64 { return 0 }
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Events == nil {
		c.Events = NopEvents{}
	}
	return c
}

// retryDelay returns the delay before retrying after the n-th consecutive failure (n >= 1):
// min(RetryInitialDelay × 2^(n-1), RetryMaxDelay).
func (c Config) retryDelay(n int) time.Duration {
	d := c.RetryInitialDelay
	for i := 1; i < n; i++ {
		if d >= c.RetryMaxDelay/2 {
			return c.RetryMaxDelay
		}
		d *= 2
	}
	return min(d, c.RetryMaxDelay)
}
