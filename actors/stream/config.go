package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// Defaults of the zero Config fields; DefaultConfig is their one source.
const (
	// defaultMaxBatch is the default Config.MaxBatch (events per EventBatch).
	defaultMaxBatch = 1024
	// defaultMaxAwaitTime is the default Config.MaxAwaitTime (the runtime's getMores wait as
	// long: it takes DefaultConfig's).
	defaultMaxAwaitTime = time.Second
	// defaultCloseTimeout is the default Config.CloseTimeout.
	defaultCloseTimeout = 5 * time.Second
	// commentPrefix prefixes the stream name in the change stream's comment.
	commentPrefix = "watchtree:"
)

// DefaultConfig returns the defaults of every Config field that has a value default: the one
// source of them. New fills each zero field of the Config it is given from it, and the runtime
// builds its stream actors from it, so that no other layer holds a default of its own that
// could silently override this one (TestActorDefaults checks that New's filling equals
// DefaultConfig). The dependencies (Clock, Logger, Observer) are not values: nil means the real
// clock, no log and no events.
func DefaultConfig() Config {
	return Config{
		Checkpointer:     treekit.CheckpointerName,
		Dispatcher:       treekit.DispatcherName,
		Snapshot:         treekit.SnapshotName,
		MaxBatch:         defaultMaxBatch,
		MaxAwaitTime:     defaultMaxAwaitTime,
		CloseTimeout:     defaultCloseTimeout,
		HistoryLostCodes: append([]int32(nil), defaultHistoryLostCodes...),
	}
}

var defaultHistoryLostCodes = []int32{286, 280, 136}

// Watcher opens the change stream at a position. The root implements it with the driver
// (Client/Database/Collection.Watch by the stream's scope, with its pipeline and fullDocument
// modes). Open is blocking I/O: the stream actor calls it on its reader goroutine, with a context
// cancelled when the actor stops or restarts.
type Watcher interface {
	// Open opens a change stream from the position; an error is a start failure of the
	// incarnation (the supervisor classifies it: a restart, or terminal for a refused pipeline).
	Open(ctx context.Context, from Position) (Cursor, error)
}

// watcherFunc adapts a function to Watcher.
type watcherFunc func(ctx context.Context, from Position) (Cursor, error)

// Open calls f.
func (f watcherFunc) Open(ctx context.Context, from Position) (Cursor, error) { return f(ctx, from) }

// Position is where and how to open the change stream. The Watcher must apply every field:
//
//	Kind RESUME_AFTER             options.ChangeStream().SetResumeAfter(Token)
//	Kind START_AFTER              SetStartAfter(Token)   (after an invalidate)
//	Kind START_AT_OPERATION_TIME  SetStartAtOperationTime(&OperationTime)
//	Kind UNSPECIFIED              no start option (the current position); not sent by the
//	                              checkpointer today, kept for Watchers used on their own
//	MaxAwaitTime                  SetMaxAwaitTime(MaxAwaitTime) (always > 0)
//	Comment                       SetComment(Comment) ("watchtree:<stream>")
type Position struct {
	Kind          messages.StartKind // which start option, per the table above
	Token         bson.Raw           // the resume token of RESUME_AFTER and START_AFTER
	OperationTime bson.Timestamp     // the cluster time of AT_OPERATION_TIME
	// MaxAwaitTime is Config.MaxAwaitTime (defaulted): how long an empty getMore waits on the
	// server, hence how often an idle stream sees a fresh post-batch resume token.
	MaxAwaitTime time.Duration
	// Comment is "watchtree:<stream>", so the cursor can be found in currentOp and server logs.
	Comment string
}

// Cursor is the part of *mongo.ChangeStream the stream actor uses; ChangeStreamCursor adapts a
// *mongo.ChangeStream. Its methods are called from the reader goroutine only.
type Cursor interface {
	// TryNext returns true with the next event in Current, or false after at most one getMore
	// (which waits up to MaxAwaitTime on the server) when none is available or on error.
	TryNext(ctx context.Context) bool
	// Current is the event TryNext returned. The stream actor copies it before the next call,
	// unless the cursor promises it stays valid (CurrentIsStable, as ChangeStreamCursor does).
	Current() bson.Raw
	// ResumeToken is the current event's _id, or the post-batch resume token once the batch is
	// exhausted (and after an empty getMore).
	ResumeToken() bson.Raw
	// RemainingBatchLength is the number of events buffered from the latest reply.
	RemainingBatchLength() int
	// Err is the error that ended the cursor (after the driver's own resume attempt).
	Err() error
	// Close kills the server cursor.
	Close(ctx context.Context) error
}

// Config configures one stream actor. Stream and Watcher are required; every other zero field
// means its documented default.
type Config struct {
	// Stream is the stream name: every log line carries it (field "stream") and the cursor's
	// comment is "watchtree:<Stream>". Required.
	Stream string
	// Watcher opens the change stream. Required.
	Watcher Watcher

	// Checkpointer and Dispatcher are the names of the sibling actors under the stream actor's
	// parent (the stream supervisor): their PIDs are "<parent id>/<name>". Defaults
	// "checkpointer" and "dispatcher", the names the root gives them.
	Checkpointer, Dispatcher string
	// CheckpointerPID and DispatcherPID, when set, are used instead of the sibling names (an
	// actor tree wired differently, or tests).
	CheckpointerPID, DispatcherPID *actor.PID
	// Snapshot is the name of the snapshot sibling (actors/snapshot), asked to run a snapshot
	// when a StartFrom names one. Default "snapshot"; SnapshotPID, when
	// set, is used instead.
	Snapshot    string
	SnapshotPID *actor.PID

	// MaxBatch is the largest number of events per EventBatch; a batch also never exceeds the
	// credit the dispatcher granted. Default 1,024, the change stream's batchSize, so that a
	// getMore reply travels as one message. Must be >= 0.
	MaxBatch int
	// MaxAwaitTime is passed to the Watcher (Position.MaxAwaitTime): the server-side wait of an
	// empty getMore. Default 1s. Must be >= 0.
	MaxAwaitTime time.Duration
	// CloseTimeout bounds Cursor.Close (killCursors) when the reader goroutine ends, on a fresh
	// context (wall clock). Default 5s. Must be >= 0.
	CloseTimeout time.Duration

	// InvalidateRestart decides what follows an invalidate event (drop, rename, dropDatabase),
	// which is always delivered to the dispatcher as an event first: true reopens the change
	// stream with startAfter the invalidate's token in the same incarnation (seqs continue);
	// false (the default) fails terminally with an error wrapping streamtree.ErrInvalidated, so the
	// supervisor gives up. Both are reported (observe.Invalidated).
	InvalidateRestart bool
	// HistoryLostCodes are the server error codes that mean the start position was lost. An open
	// failing with one of them (or a getMore failing with one before the first event of that
	// cursor) sends HistoryLost to the checkpointer instead of failing. Default
	// 286, 280 and 136. Codes must be > 0.
	HistoryLostCodes []int32

	// Clock stamps events and statistics. Default clock.Real().
	Clock clock.Clock
	// Logger receives the log lines, each with the field stream=<Stream>. Default zap.NewNop().
	Logger *zap.Logger
	// Observer receives the events the stream actor reports (observe.Started when a cursor
	// opens, observe.Invalidated), built here with Meta{Stream, Clock.Now()}, on the actor
	// goroutine. It must not block (the root passes its queue); a panic in it is recovered and
	// logged. Default observe.Nop.
	Observer observe.Observer
}

// validate checks the configuration. The error names the field and the rule; several broken
// rules are joined.
func (c Config) validate() error {
	e := treekit.NewConfigErrors("stream", c.Stream)
	if c.Watcher == nil {
		e.Add("Watcher", "must not be nil")
	}
	if c.MaxBatch < 0 {
		e.Add("MaxBatch", "must be >= 1 (0 means the default %d), got %d", defaultMaxBatch, c.MaxBatch)
	}
	if c.MaxAwaitTime < 0 {
		e.Add("MaxAwaitTime", "must be > 0 (0 means the default %v), got %v", defaultMaxAwaitTime, c.MaxAwaitTime)
	}
	if c.CloseTimeout < 0 {
		e.Add("CloseTimeout", "must be > 0 (0 means the default %v), got %v", defaultCloseTimeout, c.CloseTimeout)
	}
	for i, code := range c.HistoryLostCodes {
		if code <= 0 {
			e.Add(fmt.Sprintf("HistoryLostCodes[%d]", i), "must be > 0, got %d", code)
		}
	}
	if c.Checkpointer != "" && c.Checkpointer == c.Dispatcher && c.CheckpointerPID == nil && c.DispatcherPID == nil {
		e.Add("Dispatcher", "must differ from Checkpointer, both are %q", c.Checkpointer)
	}
	return e.Err()
}

// withDefaults returns c with every zero field replaced by DefaultConfig's value.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	// An empty (not only nil) code list means the default; a set one is copied, so that the
	// caller's slice is not shared.
	if len(c.HistoryLostCodes) == 0 {
		c.HistoryLostCodes = d.HistoryLostCodes
	}
	c.HistoryLostCodes = append([]int32(nil), c.HistoryLostCodes...)
	treekit.FillZero(&c, d)
	treekit.Defaults(c.Stream, &c.Clock, &c.Logger, &c.Observer)
	return c
}

// New validates cfg and returns the props of the stream actor. The root passes them as the
// stream supervisor's Child (supervisor.Config.Child), next to the siblings "checkpointer" and
// "dispatcher".
func New(cfg Config) (*actor.Props, error) {
	return treekit.New(cfg, Config.validate, Config.withDefaults, newStreamActor)
}
