package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

// ReplayOptions are watchtree.ReplayOptions.
type ReplayOptions struct {
	// Refresh re-reads the current document by the event's documentKey and replays the event
	// with it as fullDocument (insert, update, replace); other events replay as stored.
	Refresh bool
}

// Replay runs the stream's dead-lettered event id once more through its handler, in the
// caller's goroutine (watchtree.Runtime.Replay): on success (nil, a skip, filtered or unhandled)
// the record is deleted; on failure it is kept and marked replayed, and the handler's error
// returned. With o.Refresh the current document is read first (refreshed). Errors:
// ErrNotStarted, ErrUnknownStream, store.ErrNotFound, ErrReplayUnavailable.
func (rt *Runtime) Replay(ctx context.Context, stream, id string, o ReplayOptions) error {
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return err
	}
	st := e.store.deadLetters
	dl, err := st.GetDeadLetter(ctx, e.records, id)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, err)
	}
	if dl.EventOmitted || len(dl.Event) == 0 {
		return fmt.Errorf("%w: the event of %s was not stored (too large); re-read document %v instead",
			ErrReplayUnavailable, id, dl.DocumentKey)
	}
	raw := dl.Event
	if o.Refresh {
		if raw, err = e.refresh(ctx, dl); err != nil {
			return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, err)
		}
	}
	router := e.router(true)
	herr := replayOnce(ctx, router, raw)
	now := rt.clk.Now()
	if class, _ := router.Classify(herr); herr == nil || class == dispatcher.Skipped {
		if err := st.DeleteDeadLetter(ctx, e.records, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("watchtree: stream %q: replay %s succeeded, but deleting the dead letter failed: %w", stream, id, err)
		}
		e.log.Info("dead letter replayed", zap.String("id", id), zap.Bool("refresh", o.Refresh))
		return nil
	}
	if err := st.MarkReplayed(ctx, e.records, id, now); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("dead letter replay not recorded", zap.String("id", id), zap.Error(err))
	}
	fields := []zap.Field{zap.String("id", id), zap.Bool("refresh", o.Refresh), zap.Error(herr)}
	var rp *ReplayPanic
	if errors.As(herr, &rp) {
		fields = append(fields, zap.ByteString("stack", rp.Stack))
	}
	e.log.Warn("dead letter replay failed", fields...)
	return fmt.Errorf("watchtree: stream %q: replay %s: %w", stream, id, herr)
}

// refreshable reports whether an event of operation type op carries a fullDocument that a
// refresh re-reads.
func refreshable(op string) bool { return op == "insert" || op == "update" || op == "replace" }

// refresh returns dl's event with fullDocument replaced by the document read now by its
// documentKey from its namespace (through the stream's client), or dl's event unchanged when
// its operation type carries no fullDocument.
func (e *Entry) refresh(ctx context.Context, dl store.DeadLetter) (bson.Raw, error) {
	if !refreshable(dl.OperationType) {
		return dl.Event, nil
	}
	db, coll, ok := strings.Cut(dl.Namespace, ".")
	if !ok || coll == "" || len(dl.DocumentKey) == 0 {
		return nil, fmt.Errorf("%w: refresh needs the event's namespace and documentKey, the record has %q and %v",
			ErrReplayUnavailable, dl.Namespace, dl.DocumentKey)
	}
	doc, err := e.watcher.Client.Database(db).Collection(coll).FindOne(ctx, dl.DocumentKey).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("%w: the document %v no longer exists in %s, so the event cannot be refreshed (purge the dead letter, or replay it without refresh)",
			ErrReplayUnavailable, dl.DocumentKey, dl.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("refresh: read document %v of %s: %w", dl.DocumentKey, dl.Namespace, err)
	}
	return withFullDocument(dl.Event, doc)
}

// withFullDocument returns the change event raw with its fullDocument set to doc.
func withFullDocument(raw, doc bson.Raw) (bson.Raw, error) {
	elems, err := bsoncore.Document(raw).Elements()
	if err != nil {
		return nil, fmt.Errorf("refresh: the stored event is malformed: %w", err)
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	for _, el := range elems {
		if el.Key() != "fullDocument" {
			out = append(out, el...)
		}
	}
	out = bsoncore.AppendDocumentElement(out, "fullDocument", doc)
	out, err = bsoncore.AppendDocumentEnd(out, idx)
	return bson.Raw(out), err
}

// ReplayCheck tells whether replaying dl as stored can reach the stream's handler: its event
// is stored and decodes with the stream's current code. When it cannot, note says why and
// what to do. It routes the event as a replay would (decoding it, and running the stream's
// Filter when a handler matches), calls no handler and does no I/O.
func (rt *Runtime) ReplayCheck(stream string, dl store.DeadLetter) (ok bool, note string) {
	if dl.EventOmitted || len(dl.Event) == 0 {
		return false, "the event was not stored (too large): re-read the document by its key instead"
	}
	e, err := rt.deadLetterEntry(stream)
	if err != nil {
		return false, err.Error()
	}
	_, err = routeOnce(e.routerFor(), dl.Event)
	if err == nil {
		return true, ""
	}
	var rp *ReplayPanic
	if errors.As(err, &rp) {
		return false, "the stored event does not route: " + err.Error()
	}
	note = "the stored event does not decode: " + err.Error()
	if refreshable(dl.OperationType) {
		note += "; a replay with refresh re-reads the document and succeeds once the current one decodes"
	} else {
		note += "; it replays once the stream's type decodes it"
	}
	return false, note
}

// routeOnce routes raw without calling the handler, recovering a Filter's panic, and releases
// the invocation: the error is the decode error, if any.
func routeOnce(router dispatcher.Router, raw bson.Raw) (outcome messages.Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &ReplayPanic{Value: p, Stack: debug.Stack()}
		}
	}()
	inv, outcome, err := router.Route(raw)
	if r, ok := inv.(dispatcher.Releaser); ok {
		r.Release()
	}
	return outcome, err
}

// replayOnce routes and calls the handler once, recovering panics.
func replayOnce(ctx context.Context, router dispatcher.Router, raw bson.Raw) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &ReplayPanic{Value: p, Stack: debug.Stack()}
		}
	}()
	inv, outcome, err := router.Route(raw)
	if err != nil {
		return err
	}
	if inv == nil || outcome != messages.Outcome_OUTCOME_UNSPECIFIED {
		return nil // filtered or unhandled: settles, as in the stream
	}
	if r, ok := inv.(dispatcher.Releaser); ok {
		defer r.Release()
	}
	return inv.Call(ctx, 1)
}

// ReplayPanic is a handler panic during Replay. Its message is one line ("handler panicked:
// <value>"); the stack is in Stack, and in the replay's log line.
type ReplayPanic struct {
	Value any
	Stack []byte
}

func (p *ReplayPanic) Error() string {
	return "handler panicked: " + strings.Join(strings.Fields(fmt.Sprint(p.Value)), " ")
}

// Unwrap returns the panic value when it is an error.
func (p *ReplayPanic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}
