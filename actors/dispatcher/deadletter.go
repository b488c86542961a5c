package dispatcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"time"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/watchtree/watchtree/store"
)

// DeadLetterWriter is the part of store.DeadLetterStore the dispatcher calls (see there for
// the guarantees). It is called from the lanes concurrently, with a context cancelled when the
// dispatcher stops and bounded by Config.DeadLetterTimeout; any error is retried with backoff
// while the event stays unsettled.
type DeadLetterWriter interface {
	// PutDeadLetter: see store.DeadLetterStore.PutDeadLetter.
	PutDeadLetter(ctx context.Context, dl store.DeadLetter) error
}

// The dead-letter store satisfies the subset.
var _ DeadLetterWriter = store.DeadLetterStore(nil)

// EventID returns the stable identity of the raw change event, as its dead letter and its
// exactly-once record carry it: see eventID.
func EventID(raw []byte) string { return eventID(tokenOf(raw), raw) }

// eventID returns the event's stable identity: the resume token's _data. It falls back to the
// raw event's _id._data, then to a hash of the raw event (stable across redeliveries of the
// same bytes), so even an event with a broken token gets a deterministic dead-letter ID.
func eventID(token, raw []byte) string {
	if id, ok := tokenData(token); ok {
		return id
	}
	if v, err := bsoncore.Document(raw).LookupErr("_id"); err == nil {
		if doc, ok := v.DocumentOK(); ok {
			if id, ok := tokenData(doc); ok {
				return id
			}
		}
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func tokenData(token []byte) (string, bool) {
	if len(token) < 5 {
		return "", false
	}
	v, err := bsoncore.Document(token).LookupErr("_data")
	if err != nil {
		return "", false
	}
	s, ok := v.StringValueOK()
	return s, ok && s != ""
}

// failure is the state of an event that is being dead-lettered.
type failure struct {
	err       error
	attempts  int       // handler calls made: 0 when the event did not decode
	first     time.Time // when the first attempt ended
	last      time.Time // when the last attempt ended
	permanent bool
	decode    bool // Route failed: the event does not decode
}

// newDeadLetter builds the record of an event: the fields are read from the raw event leniently
// (an undecodable event still gets a record with whatever could be read).
func newDeadLetter(scope store.Scope, id string, token, raw []byte, f failure, now time.Time, retention time.Duration) store.DeadLetter {
	dl := store.DeadLetter{
		ID:             id,
		Stream:         scope.Stream,
		Instance:       scope.Instance,
		Token:          cloneBytes(token),
		Event:          cloneBytes(raw),
		Error:          f.err.Error(),
		ErrorType:      errorType(f),
		Attempts:       f.attempts,
		FirstAttemptAt: f.first,
		LastAttemptAt:  f.last,
		CreatedAt:      now,
	}
	if retention > 0 {
		dl.ExpiresAt = now.Add(retention)
	}
	var pe *panicError
	if errors.As(f.err, &pe) {
		dl.Stack = string(pe.Stack)
	}
	doc := bsoncore.Document(raw)
	if v, err := doc.LookupErr("operationType"); err == nil {
		dl.OperationType, _ = v.StringValueOK()
	}
	if v, err := doc.LookupErr("documentKey"); err == nil {
		if d, ok := v.DocumentOK(); ok {
			dl.DocumentKey = cloneBytes(d)
		}
	}
	if v, err := doc.LookupErr("ns"); err == nil {
		if d, ok := v.DocumentOK(); ok {
			db, _ := d.Lookup("db").StringValueOK()
			coll, _ := d.Lookup("coll").StringValueOK()
			switch {
			case coll != "":
				dl.Namespace = db + "." + coll
			default:
				dl.Namespace = db
			}
		}
	}
	return dl
}

// errorType names the error for DeadLetter.ErrorType with a stable public name, never an
// unexported Go type (which would change with the implementation): "panic" for a recovered
// panic, "decode" for an event the Router could not decode, else the first exported Go type
// in the error chain ("*mongo.CommandError", "*app.ValidationError"), else "permanent" for an
// error classified permanent, "timeout" or "canceled" for a context's error, and "error".
func errorType(f failure) string {
	var pe *panicError
	switch {
	case errors.As(f.err, &pe):
		return "panic"
	case f.decode:
		return "decode"
	}
	if t := exportedType(f.err); t != "" {
		return t
	}
	switch {
	case f.permanent:
		return "permanent"
	case errors.Is(f.err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(f.err, context.Canceled):
		return "canceled"
	}
	return "error"
}

// exportedType returns the Go type ("%T") of the first error in err's tree, depth first, whose
// type is a named, exported one; "" when there is none.
func exportedType(err error) string {
	if err == nil {
		return ""
	}
	t := reflect.TypeOf(err)
	n := t
	if n.Kind() == reflect.Pointer {
		n = n.Elem()
	}
	if r, _ := utf8.DecodeRuneInString(n.Name()); unicode.IsUpper(r) {
		return t.String()
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return exportedType(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if t := exportedType(e); t != "" {
				return t
			}
		}
	}
	return ""
}

func cloneBytes(b []byte) bson.Raw {
	if b == nil {
		return nil
	}
	return append(bson.Raw(nil), b...)
}

// putDeadLetter calls w, turning a panic of the writer into an error.
func putDeadLetter(ctx context.Context, w DeadLetterWriter, dl store.DeadLetter) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return w.PutDeadLetter(ctx, dl)
}

// rawOperationType returns the operationType field of a raw change event, or "".
func rawOperationType(raw []byte) string {
	v, err := bson.Raw(raw).LookupErr("operationType")
	if err != nil {
		return ""
	}
	op, _ := v.StringValueOK()
	return op
}
