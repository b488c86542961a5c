package watchtree

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/engine"
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
	// Error is the last error's message; Stack the panic stack, if any. ErrorType is a stable
	// public name of the error's kind: "panic", "decode", else the first exported Go type in
	// the error chain ("*mongo.CommandError", "*app.ValidationError"), else "permanent" (marked
	// with Permanent), "timeout", "canceled" (a context's error) or "error"; never an
	// unexported type of watchtree or the standard library.
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
	list, err := rt.e.DeadLetters(ctx, stream, limit)
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, len(list))
	for i, d := range list {
		out[i] = deadLetterOf(d)
	}
	return out, nil
}

// CountDeadLetters returns the number of the stream's unexpired dead letters (its dead-letter
// backlog; on an AllInstances stream this instance's), as DeadLetters would list them, with the
// store's CountDeadLetters (store/mongostore and store/memstore count without reading the
// records). Errors as DeadLetters.
func (rt *Runtime) CountDeadLetters(ctx context.Context, stream string) (int, error) {
	return rt.e.CountDeadLetters(ctx, stream)
}

// ErrReplayUnavailable means a dead letter cannot be replayed as asked: its event was not
// stored (DeadLetter.EventOmitted), or a refresh (ReplayOptions.Refresh) found no document under
// the event's documentKey (it was deleted since: purge the dead letter, or replay it as stored)
// or has no namespace or documentKey to read by. The record is left unchanged.
var ErrReplayUnavailable = engine.ErrReplayUnavailable

// ReplayOptions change what ReplayWith runs. The zero value replays the event as stored.
type ReplayOptions struct {
	// Refresh re-reads the document before the replay: the event's fullDocument becomes the
	// document found now by its documentKey in its namespace (through the stream's client), so
	// that an event dead-lettered for its document's content (a decode error, a validation
	// error) succeeds once the document is fixed. It applies to insert, update and replace
	// events; any other event replays as stored. fullDocumentBeforeChange and
	// updateDescription stay as stored. No document under the key fails with ErrReplayUnavailable.
	// Default false: the event as it was dead-lettered.
	Refresh bool
}

// Replay runs the stream's dead-lettered event id once more through the stream's handler, as
// stored: ReplayWith with the zero ReplayOptions.
func (rt *Runtime) Replay(ctx context.Context, stream, id string) error {
	return rt.ReplayWith(ctx, stream, id, ReplayOptions{})
}

// ReplayWith runs the stream's dead-lettered event id once more through the stream's handler:
// in the caller's goroutine, one attempt (Event.Attempt is 1), with ctx, a handler panic
// recovered into an error of one line ("handler panicked: <value>"; the stack is logged with
// the WARN line of the failed replay, and the record keeps the stack of the original failure).
// o.Refresh first re-reads the document (see ReplayOptions). It reads, deletes and updates
// only the stream's own record of id, on an AllInstances stream this instance's (another
// stream's or another instance's dead letter of the same event is left alone). The stream must
// be registered on rt (by Spawn or Props: its handlers are needed); it need not be running.
//
// On success — the handler returned nil or Skip, the Filter rejected the event, or no handler
// matches its operation type — the record is deleted, and it returns nil. On failure the
// record is kept, its ReplayCount and LastReplayAt are updated, and the handler's error is
// returned (a *DecodeError for an event that still does not decode). Errors: ErrNotStarted,
// ErrUnknownStream, an error matching store.ErrNotFound for an id the stream has no unexpired
// dead letter of, ErrReplayUnavailable.
//
// A replay does not go through the stream's lanes, so it may run concurrently with the
// stream's own events of the same document: make the handler idempotent by Event.ID (as
// at-least-once delivery requires anyway).
func (rt *Runtime) ReplayWith(ctx context.Context, stream, id string, o ReplayOptions) error {
	return rt.e.Replay(ctx, stream, id, engine.ReplayOptions{Refresh: o.Refresh})
}
