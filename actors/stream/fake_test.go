package stream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// closedCursor is a cursor the server already closed: no events, no error, id 0.
type closedCursor struct{ closed chan struct{} }

func (c *closedCursor) TryNext(context.Context) bool { return false }
func (c *closedCursor) Current() bson.Raw            { return nil }
func (c *closedCursor) ResumeToken() bson.Raw        { return nil }
func (c *closedCursor) RemainingBatchLength() int    { return 0 }
func (c *closedCursor) Err() error                   { return nil }
func (c *closedCursor) ID() int64                    { return 0 }
func (c *closedCursor) Close(context.Context) error  { close(c.closed); return nil }

// A cursor the server closed without an error or an invalidate (id 0) is a death
// (errCursorClosed), not a busy loop; the cursor is closed.
func TestStreamServerClosedCursorFails(t *testing.T) {
	cur := &closedCursor{closed: make(chan struct{})}
	h := newHarness(t, harnessOpts{edit: func(c *Config) {
		c.Watcher = watcherFunc(func(context.Context, Position) (Cursor, error) { return cur, nil })
	}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING) // the open succeeded
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	if !errors.Is(tr.Cause, errCursor) || !errors.Is(tr.Cause, errCursorClosed) {
		t.Fatalf("cause %v, want errCursor wrapping errCursorClosed", tr.Cause)
	}
	<-cur.closed
}

// An open failing with a non-history-lost server error is a death reported as CursorFailed{Open}
// wrapping the driver's error, so a classifier can see its code (here Unauthorized, 13).
func TestStreamOpenFailureFails(t *testing.T) {
	h := newHarness(t, harnessOpts{edit: func(c *Config) {
		c.Watcher = watcherFunc(func(context.Context, Position) (Cursor, error) {
			return nil, mongo.CommandError{Code: 13, Name: "Unauthorized", Message: "not authorized"}
		})
	}})
	tr := h.await(messages.SupervisorState_SUPERVISOR_STATE_BACKOFF)
	var ce mongo.CommandError
	if !errors.Is(tr.Cause, errCursor) || !errors.As(tr.Cause, &ce) || ce.Code != 13 {
		t.Fatalf("cause %v, want errCursor wrapping the server error 13", tr.Cause)
	}
	if !strings.Contains(tr.Cause.Error(), "opening the change stream failed") {
		t.Fatalf("cause %v, want an open failure", tr.Cause)
	}
	if msgs := h.w.checkpointerMsgs(); len(msgs) != 1 {
		t.Fatalf("checkpointer got %v; a non-history-lost error must not send HistoryLost", msgs)
	}
}

// A panicking Observer never breaks the stream actor.
func TestStreamEventsPanicIgnored(t *testing.T) {
	h := newHarness(t, harnessOpts{edit: func(c *Config) {
		c.Observer = observe.Func(func(observe.Event) { panic("observer bug") })
		c.InvalidateRestart = true
	}})
	h.await(messages.SupervisorState_SUPERVISOR_STATE_RUNNING)
	h.insert(0, 2)
	if err := h.coll.Drop(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.waitEvents(4)
	eventually(t, "reopened after the invalidate", func() bool { return len(h.watcher.positions()) == 2 })
	h.insert(5, 6)
	h.waitEvents(5)
	h.noTransition()
}
