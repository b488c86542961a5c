package store

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// DeadLetter is an event whose attempts ran out (or whose error was permanent). The event
// settles only once its dead letter has been written durably.
//
// A dead letter's key is (Stream, Instance, ID): several streams may watch the same collection
// and dead-letter the same event, and so may the instances of an AllInstances stream; each
// keeps its own record in a shared store.
type DeadLetter struct {
	// ID is stable: the event ID (the resume token's _data). A redelivered event's dead letter
	// overwrites the previous one of the same scope (PutDeadLetter is an upsert by (Stream,
	// Instance, ID)), never duplicates it.
	ID string
	// Stream is the stream name and Instance the instance name of an AllInstances stream
	// (empty for the shared scope); dead letters are listed, read, replayed and deleted per
	// Scope.
	Stream   string
	Instance string
	// Token is the event's resume token document.
	Token bson.Raw
	// OperationType is the change event's operationType ("insert", "update", …).
	OperationType string
	// DocumentKey is the change event's documentKey; nil for events without one.
	DocumentKey bson.Raw
	// Namespace is "db.collection" of the event; empty for database-level events.
	Namespace string
	// Event is the raw change event.
	Event bson.Raw
	// EventOmitted reports that a store left Event out because the record would have exceeded
	// its size limit (mongostore: the 16 MiB BSON document limit; a change event may itself be
	// up to 16 MiB). Token, DocumentKey and Namespace still identify the event. Dropping the
	// copy is better than a dead-letter write that can never succeed, which would block the
	// event's lane forever. Writers leave it false.
	EventOmitted bool
	// Error is the last error's message; ErrorType a stable public name of its kind: "panic",
	// "decode", else the first exported Go type in the error chain ("*mongo.CommandError"),
	// else "permanent", "timeout", "canceled" or "error" (never an unexported type such as
	// *fmt.wrapError); Stack the panic stack, if any.
	Error     string
	ErrorType string
	Stack     string
	// Attempts is the number of handler invocations made (including the first); 0 for an
	// event that did not decode (ErrorType "decode"): no handler was called.
	Attempts int
	// FirstAttemptAt and LastAttemptAt bound the attempts; CreatedAt is when the dead letter
	// was written. Dead letters of a stream are listed by CreatedAt.
	FirstAttemptAt time.Time
	LastAttemptAt  time.Time
	CreatedAt      time.Time
	// ExpiresAt is when the store may delete the record (retention); zero = never. Expired
	// records are not returned by reads, and are removed eventually (mongostore: by the
	// server's TTL monitor, within about a minute).
	ExpiresAt time.Time
	// ReplayCount counts the replays of this dead letter (MarkReplayed); LastReplayAt is the
	// latest one's time (zero = never replayed).
	ReplayCount  int
	LastReplayAt time.Time
}

// Scope returns the scope of the record: its Stream and Instance.
func (d DeadLetter) Scope() Scope { return Scope{Stream: d.Stream, Instance: d.Instance} }

// Clone returns a deep copy of d.
func (d DeadLetter) Clone() DeadLetter {
	d.Token = cloneRaw(d.Token)
	d.DocumentKey = cloneRaw(d.DocumentKey)
	d.Event = cloneRaw(d.Event)
	return d
}

// DeadLetterStore keeps dead letters (watchtree.Config.DeadLetters). A record's key is (Stream,
// Instance, ID): streams that dead-letter the same event each keep their own record, and so
// does each instance of an AllInstances stream; every read and mutation names its Scope and
// ID. The dispatcher calls PutDeadLetter from its lanes concurrently; the runtime lists, reads,
// deletes and marks records for operators (Runtime.DeadLetters, Replay, the console's purge).
// store/memstore and store/mongostore implement it, and store/storetest.TestDeadLetterStore is
// its contract.
//
// Every method honours ctx: a done context fails the call with an error matching ctx.Err() and
// changes nothing. Expired records (ExpiresAt passed) are absent from every read.
type DeadLetterStore interface {
	// PutDeadLetter upserts dl by (dl.Stream, dl.Instance, dl.ID): a second put of the same key
	// replaces the whole record; another scope's record of the same ID is left alone. A nil
	// error means the record is durable: the event settles right after. Any error is retried
	// with backoff while the event stays unsettled.
	PutDeadLetter(ctx context.Context, dl DeadLetter) error
	// ListDeadLetters returns up to limit (limit <= 0: all) unexpired dead letters of scope,
	// oldest first: ascending CreatedAt, ties by ID; empty, not an error, when there are none.
	ListDeadLetters(ctx context.Context, scope Scope, limit int) ([]DeadLetter, error)
	// GetDeadLetter returns scope's dead letter id, or an error matching ErrNotFound when there
	// is none or it has expired.
	GetDeadLetter(ctx context.Context, scope Scope, id string) (DeadLetter, error)
	// DeleteDeadLetter removes scope's dead letter id; an error matching ErrNotFound when there
	// is none.
	DeleteDeadLetter(ctx context.Context, scope Scope, id string) error
	// MarkReplayed increments the record's ReplayCount and sets its LastReplayAt to at; an
	// error matching ErrNotFound when there is none (or it has expired).
	MarkReplayed(ctx context.Context, scope Scope, id string, at time.Time) error
	// CountDeadLetters returns the number of scope's unexpired dead letters, as
	// ListDeadLetters(ctx, scope, 0) would list them, preferably without reading them (a
	// store that cannot count may list and count). Runtime.CountDeadLetters, the console's
	// DEAD column and the metrics' backlog read it; store/storetest checks it agrees with the
	// list. It is part of the interface, not an optional method, so that a store that wraps
	// another (the runtime's own lease-fenced one) never silently loses it.
	CountDeadLetters(ctx context.Context, scope Scope) (int64, error)
}
