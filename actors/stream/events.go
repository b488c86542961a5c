package stream

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/wire"
)

// Events receives what the stream actor does; the root maps it to watchtree.Observer. Methods are
// called on the stream actor's goroutine and must not block (hand the value to a channel or a
// goroutine of your own). A panic in a method is recovered and logged; it never breaks the actor.
type Events interface {
	// Opened: a change stream was opened (the first of an incarnation, or a reopen after an
	// invalidate).
	Opened(OpenedEvent)
	// Invalidated: an invalidate event was read and delivered to the dispatcher; Restart says
	// whether the stream reopens with startAfter (true) or fails terminally (false).
	Invalidated(InvalidatedEvent)
	// CursorFailed: the cursor died or could not be opened; the actor fails next (transient), so
	// the supervisor restarts it. Not reported for history-lost errors at open, which go to the
	// checkpointer (it reports them).
	CursorFailed(CursorFailedEvent)
}

// OpenedEvent is reported by Events.Opened.
type OpenedEvent struct {
	Incarnation uint64 // the stream actor's incarnation, from 1
	// Kind and Source describe the position: the StartFrom's kind and source, or START_AFTER and
	// "invalidate" for a reopen after an invalidate.
	Kind   wire.StartKind
	Source string
	// NextSeq is the seq the first event of this cursor gets.
	NextSeq uint64
	// Reopen is true for a reopen within the incarnation (after an invalidate).
	Reopen bool
	At     time.Time
}

// InvalidatedEvent is reported by Events.Invalidated.
type InvalidatedEvent struct {
	Incarnation uint64 // the stream actor's incarnation, from 1
	// Seq is the seq the invalidate event was delivered with.
	Seq uint64
	// Token is the invalidate event's _id (the startAfter position).
	Token bson.Raw
	// Cause is the operationType of the event read right before the invalidate on the same
	// cursor: "drop", "rename" or "dropDatabase"; empty when none was read (filtered out by the
	// pipeline, or the server sent the invalidate alone).
	Cause string
	// Restart: the stream reopens with startAfter Token (Config.InvalidateRestart); otherwise it
	// fails terminally with ErrInvalidated.
	Restart bool
	At      time.Time
}

// CursorFailedEvent is reported by Events.CursorFailed.
type CursorFailedEvent struct {
	Incarnation uint64 // the stream actor's incarnation, from 1
	// Err is the failure the actor fails with (an *Error wrapping ErrCursor and the cause).
	Err error
	// Code is the server error code, 0 when none.
	Code int32
	// Open is true when opening the cursor failed, false when an open cursor died.
	Open bool
	At   time.Time
}

// NopEvents ignores every event.
type NopEvents struct{}

// Opened ignores the report.
func (NopEvents) Opened(OpenedEvent) {}

// Invalidated ignores the report.
func (NopEvents) Invalidated(InvalidatedEvent) {}

// CursorFailed ignores the report.
func (NopEvents) CursorFailed(CursorFailedEvent) {}
