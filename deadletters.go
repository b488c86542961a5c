package watchtree

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/store"
)

// DeadLetter is a dead-lettered event as stored in the stream's dead-letter collection (default
// "_wt_dead_letters"): an event whose attempts ran out, whose error was permanent, or that did
// not decode. See DeadLetterPolicy.
type DeadLetter struct {
	// ID is the event ID (Event.ID, the resume token's _data): stable across redeliveries, so a
	// redelivered event overwrites its record. Pass it to Replay.
	ID string
	// Stream is the stream name; Instance the instance that dead-lettered the event (its
	// Config.InstanceName) on an AllInstances stream, empty on a SingleLeader stream.
	Stream, Instance string
	// Token is the event's resume token document.
	Token bson.Raw
	// OperationType, DocumentKey and Namespace ("db.coll") identify the change.
	OperationType OperationType
	DocumentKey   bson.Raw
	Namespace     string
	// Event is the raw change event; nil when EventOmitted.
	Event bson.Raw
	// EventOmitted reports that the event was not stored because the record would have exceeded
	// the 16 MiB document limit; such a dead letter cannot be replayed (Replay fails), re-read the
	// document by DocumentKey instead.
	EventOmitted bool
	// Error is the last error's message; ErrorType its classification ("panic", "decode") or Go
	// type; Stack the panic stack, if any.
	Error, ErrorType, Stack string
	// Attempts is the number of handler calls made (0 for a decode error).
	Attempts int
	// FirstAttemptAt and LastAttemptAt bound the attempts; CreatedAt is when the record was
	// written; ExpiresAt when retention removes it (zero: never).
	FirstAttemptAt, LastAttemptAt, CreatedAt, ExpiresAt time.Time
	// ReplayCount counts the failed replays of this record (a successful replay deletes it);
	// LastReplayAt is the latest one.
	ReplayCount  int
	LastReplayAt time.Time
}

func deadLetterOf(d store.DeadLetter) DeadLetter {
	return DeadLetter{
		ID: d.ID, Stream: d.Stream, Instance: d.Instance, Token: d.Token, OperationType: OperationType(d.OperationType),
		DocumentKey: d.DocumentKey, Namespace: d.Namespace, Event: d.Event, EventOmitted: d.EventOmitted,
		Error: d.Error, ErrorType: d.ErrorType, Stack: d.Stack, Attempts: d.Attempts,
		FirstAttemptAt: d.FirstAttemptAt, LastAttemptAt: d.LastAttemptAt, CreatedAt: d.CreatedAt,
		ExpiresAt: d.ExpiresAt, ReplayCount: d.ReplayCount, LastReplayAt: d.LastReplayAt,
	}
}

// DeadLetters returns up to limit (limit <= 0: all) unexpired dead letters of the stream, oldest
// first. Dead letters are scoped to their stream, and on an AllInstances stream to this
// instance (Config.InstanceName): only the records the stream wrote here are listed, even when
// other streams, or other instances of this one, dead-lettered the same events in the same
// store; a SingleLeader stream's dead letters are shared by its instances. The stream must be
// registered on rt (by Spawn or Props; it need not be running), so that its store (the
// stream's DeadLetterPolicy.Collection) is known; another name fails with an error matching
// ErrUnknownStream, as Handle does. It fails with ErrNotStarted before Start.
func (rt *Runtime) DeadLetters(ctx context.Context, stream string, limit int) ([]DeadLetter, error) {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return nil, err
	}
	list, err := e.store.DeadLetters.ListDeadLetters(ctx, e.records, limit)
	if err != nil {
		return nil, fmt.Errorf("watchtree: stream %q: list dead letters: %w", stream, err)
	}
	out := make([]DeadLetter, len(list))
	for i, d := range list {
		out[i] = deadLetterOf(d)
	}
	return out, nil
}

// CountDeadLetters returns the number of the stream's unexpired dead letters (its dead-letter
// backlog; on an AllInstances stream this instance's), as DeadLetters would list them. A store
// that implements store.DeadLetterCounter counts without reading the records; any other store
// is listed in full. Errors as DeadLetters.
func (rt *Runtime) CountDeadLetters(ctx context.Context, stream string) (int, error) {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return 0, err
	}
	if c, ok := e.store.DeadLetters.(store.DeadLetterCounter); ok {
		n, err := c.CountDeadLetters(ctx, e.records)
		if err != nil {
			return 0, fmt.Errorf("watchtree: stream %q: count dead letters: %w", stream, err)
		}
		return int(n), nil
	}
	list, err := e.store.DeadLetters.ListDeadLetters(ctx, e.records, 0)
	if err != nil {
		return 0, fmt.Errorf("watchtree: stream %q: count dead letters: %w", stream, err)
	}
	return len(list), nil
}

// ErrReplayUnavailable means a dead letter cannot be replayed: its event was not stored
// (DeadLetter.EventOmitted).
var ErrReplayUnavailable = errors.New("watchtree: dead letter cannot be replayed")

// Replay runs the stream's dead-lettered event id once more through the stream's handler: in
// the caller's goroutine, one attempt (Event.Attempt is 1), with ctx, a handler panic recovered
// into an error carrying its stack. It reads, deletes and updates only the stream's own record
// of id, on an AllInstances stream this instance's (another stream's or another instance's dead
// letter of the same event is left alone). The stream must be
// registered on rt (by Spawn or Props: its handlers are needed); it need not be running.
//
// On success — the handler returned nil or Skip, the Filter rejected the event, or no handler
// matches its operation type — the record is deleted, and Replay returns nil. On failure the
// record is kept, its ReplayCount and LastReplayAt are updated, and the handler's error is
// returned (a decode error for an event that still does not decode). Errors: ErrNotStarted,
// ErrUnknownStream, an error matching store.ErrNotFound for an id the stream has no unexpired
// dead letter of, ErrReplayUnavailable.
//
// Replay does not go through the stream's lanes, so it may run concurrently with the stream's
// own events of the same document: make the handler idempotent by Event.ID (as at-least-once
// delivery requires anyway).
func (rt *Runtime) Replay(ctx context.Context, stream, id string) error {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return err
	}
	st := e.store.DeadLetters
	dl, err := st.GetDeadLetter(ctx, e.records, id)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, err)
	}
	if dl.EventOmitted || len(dl.Event) == 0 {
		return fmt.Errorf("%w: the event of %s was not stored (too large); re-read document %v instead",
			ErrReplayUnavailable, id, dl.DocumentKey)
	}
	herr := replayOnce(ctx, e, dl.Event)
	now := rt.clk.Now()
	if herr == nil || IsSkip(herr) {
		if err := st.DeleteDeadLetter(ctx, e.records, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("watchtree: stream %q: replay %s succeeded, but deleting the dead letter failed: %w", stream, id, err)
		}
		e.log.Info("dead letter replayed", zap.String("id", id))
		return nil
	}
	if err := st.MarkReplayed(ctx, e.records, id, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("dead letter replay not recorded", zap.String("id", id), zap.Error(err))
	}
	e.log.Warn("dead letter replay failed", zap.String("id", id), zap.Error(herr))
	return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, herr)
}

// replayOnce routes and calls the handler once, recovering panics.
func replayOnce(ctx context.Context, e *streamEntry, raw bson.Raw) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &replayPanic{value: p, stack: debug.Stack()}
		}
	}()
	inv, outcome, err := e.routerFor().Route(raw)
	if err != nil {
		return err
	}
	if inv == nil || outcome != wire.Outcome_OUTCOME_UNSPECIFIED {
		return nil // filtered or unhandled: settles, as in the stream
	}
	return inv.Call(ctx, 1)
}

// replayPanic is a handler panic during Replay.
type replayPanic struct {
	value any
	stack []byte
}

func (p *replayPanic) Error() string {
	return fmt.Sprintf("handler panicked: %v\n%s", p.value, p.stack)
}

func (p *replayPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// deadLetterEntry returns the entry of stream, which must be registered on rt.
func (rt *Runtime) deadLetterEntry(stream string) (*streamEntry, error) {
	return rt.registeredEntry(stream, "dead letters are read through the stream that wrote them: spawn it on this runtime")
}

// registeredEntry returns the entry of stream, which must be registered on rt; hint explains
// an unknown stream.
func (rt *Runtime) registeredEntry(stream, hint string) (*streamEntry, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.state == rtNew {
		return nil, ErrNotStarted
	}
	e, ok := rt.streams[stream]
	if !ok {
		return nil, fmt.Errorf("%w: %q (%s)", ErrUnknownStream, stream, hint)
	}
	return e, nil
}
