package watchtree

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/watchtree/watchtree/internal/rawbson"
)

// OperationType is a change event's operationType, as the server spells it.
//
// It is a string type rather than a closed enum so that event kinds this package has no constant
// for (the expanded events create, createIndexes, modify, ... that a Pipeline may let through)
// keep their server name instead of collapsing into an opaque "other"; they reach OnChange. Use
// Known to tell them apart.
type OperationType string

// Operation types with a constant; all others reach OnChange with their server name.
const (
	OpInsert       OperationType = "insert"
	OpUpdate       OperationType = "update"
	OpReplace      OperationType = "replace"
	OpDelete       OperationType = "delete"
	OpDrop         OperationType = "drop"
	OpRename       OperationType = "rename"
	OpDropDatabase OperationType = "dropDatabase"
	OpInvalidate   OperationType = "invalidate"
	// OpSnapshot is the operation type of a document copied by a snapshot (Stream.Snapshot):
	// FullDocument is the document as read, DocumentKey its {_id}, ClusterTime and WallTime are
	// zero, and ID() is "snapshot:<snapshot id>:<db.coll>:<hex of the _id>", stable for the
	// document within one snapshot (a resumed snapshot gives a re-read document the same ID).
	OpSnapshot OperationType = "snapshot"
)

// knownOps are the Op constants: Known checks against them, and readOperationType returns them
// (not a new string) for the types it reads.
var knownOps = [...]OperationType{OpInsert, OpUpdate, OpReplace, OpDelete, OpDrop, OpRename, OpDropDatabase, OpInvalidate, OpSnapshot}

// Known reports whether op is one of the Op constants.
func (op OperationType) Known() bool {
	return slices.Contains(knownOps[:], op)
}

// Namespace is a database and collection name. Coll is empty for a dropDatabase event.
type Namespace struct {
	DB   string // the database
	Coll string // the collection; empty for a dropDatabase event
}

// String returns "db.coll", or "db" when Coll is empty.
func (n Namespace) String() string {
	if n.Coll == "" {
		return n.DB
	}
	return n.DB + "." + n.Coll
}

// UpdateDescription is the updateDescription of an update event: what the update changed.
type UpdateDescription struct {
	// UpdatedFields maps each updated dotted path ("status", "items.2.qty") to its new value.
	UpdatedFields bson.Raw
	// RemovedFields lists the dotted paths removed by the update ($unset).
	RemovedFields []string
	// TruncatedArrays lists the arrays shortened by the update, with their new length.
	TruncatedArrays []TruncatedArray
}

// TruncatedArray is one entry of UpdateDescription.TruncatedArrays: the array at Field now has
// NewSize elements; the elements from index NewSize on were removed.
type TruncatedArray struct {
	Field   string // the array's dotted path
	NewSize int    // its length after the update
}

// Changed reports whether the update touched path, a dotted path such as "address.city" or
// "items.2". It is true when, for some changed path C of the description:
//   - C is an updated or removed field and C == path, C is a parent of path (the whole
//     sub-document was set or removed: "address" for "address.city"), or C is a child of path
//     (something inside path changed: "address.city" for "address");
//   - C is a truncated array and C == path, C is a child of path, or path is inside C at a
//     removed index (index >= NewSize: "items.5" when items shrank to 5) or under a non-numeric
//     segment ("items.qty", which may have lived in a removed element).
//
// Paths are compared segment by segment: "addr" is unrelated to "address". The empty path is
// the root: true when anything changed. Changed on a nil *UpdateDescription is false.
func (u *UpdateDescription) Changed(path string) bool {
	if u == nil {
		return false
	}
	if len(u.UpdatedFields) > 4 {
		rem := u.UpdatedFields[4:]
		for len(rem) > 1 {
			el, next, ok := bsoncore.ReadElement(rem)
			if !ok {
				break
			}
			if pathsRelated(el.Key(), path) {
				return true
			}
			rem = next
		}
	}
	for _, f := range u.RemovedFields {
		if pathsRelated(f, path) {
			return true
		}
	}
	for _, t := range u.TruncatedArrays {
		if t.Field == path || isParentPath(path, t.Field) {
			return true
		}
		if isParentPath(t.Field, path) {
			seg := path[len(t.Field):]
			if t.Field != "" {
				seg = seg[1:] // the dot
			}
			if i := strings.IndexByte(seg, '.'); i >= 0 {
				seg = seg[:i]
			}
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= t.NewSize {
				return true
			}
		}
	}
	return false
}

// pathsRelated reports whether a and b are equal or one is a parent of the other.
func pathsRelated(a, b string) bool {
	return a == b || isParentPath(a, b) || isParentPath(b, a)
}

// isParentPath reports whether parent is a strict ancestor of child; "" is the ancestor of every
// non-empty path.
func isParentPath(parent, child string) bool {
	if parent == "" {
		return child != ""
	}
	return len(child) > len(parent) && child[len(parent)] == '.' && strings.HasPrefix(child, parent)
}

// TxnInfo identifies the multi-document transaction an event belongs to.
type TxnInfo struct {
	// LSID is the logical session id document ({id: UUID, uid: BinData}).
	LSID bson.Raw
	// TxnNumber is the transaction number within the session.
	TxnNumber int64
}

// Event is one change event, decoded once and handed to the stream's handler. The same *Event is
// passed to every attempt of a retried event, with Attempt updated; handlers must not keep it
// after they return, nor modify it: once the event has settled, the *Event is reused for a later
// event. What it points to stays valid and may be kept: FullDocument,
// FullDocumentBeforeChange, UpdateDescription, and the values its methods return.
//
// The BSON an event offers (Raw, ResumeToken, DocumentKey, UpdateDescription.UpdatedFields, and
// the documents of a Stream[bson.Raw]) is not copied: it is a slice of the server's reply, which
// holds the events of a whole batch (up to 16 MiB). Keeping one slice keeps that reply in memory;
// bytes.Clone what you keep for long.
//
// The decoded documents are fields, so handlers use them directly; everything else is read
// through methods.
type Event[T any] struct {
	// FullDocument is the document decoded into T: always set on insert and replace, on update
	// only with a FullDocument mode other than FullDocumentDefault, never on delete. It is nil
	// when the server sent no document or null (for example updateLookup on a deleted document).
	FullDocument *T
	// FullDocumentBeforeChange is the pre-image decoded into T, on update, replace and delete
	// with a PreImageMode other than PreImageOff; nil when absent or null.
	FullDocumentBeforeChange *T
	// UpdateDescription is set on update events only; nil otherwise.
	UpdateDescription *UpdateDescription

	raw         bson.Raw
	id          []byte // the resume token's _data bytes (a sub-slice of raw): ID converts on call
	token       bson.Raw
	op          OperationType
	ns          Namespace
	to          Namespace
	hasTo       bool
	documentKey bson.Raw
	clusterTime bson.Timestamp
	wallTime    time.Time
	txn         TxnInfo
	hasLSID     bool
	hasTxnNum   bool
	stream      string
	attempt     int
}

// ID returns the event's stable identity: the resume token's _data string. It is the same on
// every redelivery of the event (a retry, a replay after a crash, a dead-letter replay), and
// unique per event within a deployment, so it can serve as an idempotency key.
//
// Each call returns a new string (the event keeps only the bytes, so that handlers that never
// call ID do not pay an allocation per event); keep the result rather than calling ID in a loop.
func (e *Event[T]) ID() string { return string(e.id) }

// ResumeToken returns the event's _id document, the position to resume after it.
func (e *Event[T]) ResumeToken() bson.Raw { return e.token }

// OperationType returns the event's operation type.
func (e *Event[T]) OperationType() OperationType { return e.op }

// DocumentKey returns the documentKey ({_id: ...}, with the shard key fields first on a sharded
// collection); nil for events without one (drop, rename, dropDatabase, invalidate).
func (e *Event[T]) DocumentKey() bson.Raw { return e.documentKey }

// DocumentID returns the documentKey's _id, or the zero RawValue when there is none. Use the
// RawValue accessors for its type: ObjectIDOK, StringValueOK, Int64OK, AsInt64OK, ...
func (e *Event[T]) DocumentID() bson.RawValue {
	if e.documentKey == nil {
		return bson.RawValue{}
	}
	v, err := e.documentKey.LookupErr("_id")
	if err != nil {
		return bson.RawValue{}
	}
	return v
}

// ClusterTime returns the oplog time of the write. All events of one transaction share the
// commit time.
func (e *Event[T]) ClusterTime() bson.Timestamp { return e.clusterTime }

// WallTime returns the server's wall-clock time of the write (millisecond precision, UTC), or
// the zero time when the server did not send it (before MongoDB 6.0).
func (e *Event[T]) WallTime() time.Time { return e.wallTime }

// Namespace returns the database and collection the event happened in; empty for invalidate.
func (e *Event[T]) Namespace() Namespace { return e.ns }

// To returns the new namespace of a rename event, and false for every other event.
func (e *Event[T]) To() (Namespace, bool) { return e.to, e.hasTo }

// Txn returns the transaction of an event written by a multi-document transaction, and false
// otherwise (false unless both lsid and txnNumber are present).
func (e *Event[T]) Txn() (TxnInfo, bool) { return e.txn, e.hasLSID && e.hasTxnNum }

// Attempt returns the 1-based number of the current handler call for this event.
func (e *Event[T]) Attempt() int { return e.attempt }

// Raw returns the change event document exactly as the server sent it.
func (e *Event[T]) Raw() bson.Raw { return e.raw }

// Stream returns the name of the stream the event was read by.
func (e *Event[T]) Stream() string { return e.stream }

// Changed reports whether the event may have changed the document at path. For an update it is
// UpdateDescription.Changed (see there for the exact rule; true if the description is missing).
// For insert, replace and delete it is true: the whole document was written or removed. For every
// other operation it is false.
func (e *Event[T]) Changed(path string) bool {
	switch e.op {
	case OpUpdate:
		if e.UpdateDescription == nil {
			return true
		}
		return e.UpdateDescription.Changed(path)
	case OpInsert, OpReplace, OpDelete, OpSnapshot:
		return true
	}
	return false
}

// DecodeError reports a change event that could not be decoded: a document that does not fit T,
// or a malformed event field. It is permanent (IsPermanent is true): the event is dead-lettered at
// once, with this error, and never retried.
type DecodeError struct {
	// Stream is the stream that read the event.
	Stream string
	// Field is the event field that failed: "fullDocument", "fullDocumentBeforeChange",
	// "clusterTime", ...; empty when the event document itself is malformed.
	Field string
	// Type is what the field was decoded into: the Go type for documents ("main.Order"), the
	// expected BSON type otherwise ("timestamp").
	Type string
	// Err is the underlying error.
	Err error
}

// Error renders `watchtree: Stream "orders": cannot decode fullDocument into main.Order: <err>`.
func (e *DecodeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "watchtree: Stream %q: cannot decode ", e.Stream)
	if e.Field == "" {
		b.WriteString("change event")
	} else {
		b.WriteString(e.Field)
	}
	if e.Type != "" {
		b.WriteString(" into ")
		b.WriteString(e.Type)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Permanent reports true: a decode error does not go away on retry.
func (e *DecodeError) Permanent() bool { return true }

// errMissing is the DecodeError cause for a required field that is absent.
var errMissing = errors.New("missing")

// decodeEvent decodes a raw change event (the shape of mongo-wire §3.3) into an Event[T], once.
// Documents are decoded into T with the driver's default registry; the event keeps raw (no copy).
// Unknown fields (collectionUUID, operationDescription, ...) are ignored. A field of the wrong
// BSON type, or a document that does not decode into T, gives a *DecodeError.
func decodeEvent[T any](raw bson.Raw, stream string, attempt int) (*Event[T], error) {
	ev := &Event[T]{}
	if err := fillEvent(ev, raw, stream, attempt, nil, nil); err != nil {
		return nil, err
	}
	return ev, nil
}

// nsCache remembers the last decoded namespace of a stream, so that the common case (every event
// of a collection stream has the same ns) does not allocate its strings again. It is shared by
// the lanes of one router.
type nsCache struct{ last atomic.Pointer[nsEntry] }

type nsEntry struct {
	raw []byte // the ns document's bytes
	ns  Namespace
}

// decode returns the namespace of the ns document doc, from the cache when doc is unchanged.
func (c *nsCache) decode(val bsoncore.Value) (Namespace, error) {
	if c == nil {
		return decodeNamespace(val)
	}
	if e := c.last.Load(); e != nil && val.Type == bsoncore.TypeEmbeddedDocument && bytes.Equal(e.raw, val.Data) {
		return e.ns, nil
	}
	ns, err := decodeNamespace(val)
	if err == nil {
		c.last.Store(&nsEntry{raw: bytes.Clone(val.Data), ns: ns})
	}
	return ns, err
}

// errNotWanted is fillEvent's answer for an event whose operation type its wants rejects.
var errNotWanted = errors.New("watchtree: no handler for the operation type")

// fillEvent decodes raw into ev, which must be zero. cache may be nil. Each document is
// decoded into a T of its own, so a handler may keep FullDocument (or the pre-image) after it
// returns while the Event itself is reused.
//
// wants, when not nil, is asked as soon as the operation type is read (the second field of a
// server's event): when it says no, fillEvent stops and returns errNotWanted, whatever the
// rest of the event holds, without decoding any document. A field before the operation type
// that does not decode is reported only once the operation type is wanted, so an unwanted
// event never fails, as if only its operation type had been peeked at.
func fillEvent[T any](ev *Event[T], raw bson.Raw, stream string, attempt int, cache *nsCache, wants func(OperationType) bool) error {
	ev.raw, ev.stream, ev.attempt = raw, stream, attempt
	var hasID, hasOp bool
	var early error // the first field error before the operation type
	bad := func(field, typ string, err error) error {
		return &DecodeError{Stream: stream, Field: field, Type: typ, Err: err}
	}
	rem, ok := rawbson.Elements(raw)
	if !ok {
		return bad("", "", fmt.Errorf("malformed BSON document (%d bytes)", len(raw)))
	}
	for i := 0; i < len(rem); {
		t, k, end, ok := rawbson.ElementAt(rem, i)
		if !ok {
			return bad("", "", errors.New("malformed BSON element"))
		}
		key, val := rem[i+1:k], bsoncore.Value{Type: t, Data: rem[k+1 : end : end]}
		i = end
		var ferr error       // this field's error
		switch string(key) { // no allocation: the compiler compares in place
		case "_id":
			doc, ok := val.DocumentOK()
			if !ok {
				ferr = bad("_id", "document", fmt.Errorf("got %s", val.Type))
				break
			}
			dv, _ := rawbson.Lookup(doc, "_data")
			data, ok := readStringBytes(dv.Value)
			if !ok || dv.Type != bsoncore.TypeString {
				ferr = bad("_id._data", "string", errMissing)
				break
			}
			ev.token, ev.id, hasID = bson.Raw(doc), data, true
		case "operationType":
			op, ok := readOperationType(val)
			if !ok {
				ferr = bad("operationType", "string", fmt.Errorf("got %s", val.Type))
				break
			}
			ev.op, hasOp = op, true
			if wants != nil && !wants(op) {
				return errNotWanted
			}
			if early != nil {
				return early
			}
		case "clusterTime":
			t, i, ok := val.TimestampOK()
			if !ok {
				ferr = bad("clusterTime", "timestamp", fmt.Errorf("got %s", val.Type))
				break
			}
			ev.clusterTime = bson.Timestamp{T: t, I: i}
		case "wallTime":
			ms, ok := val.DateTimeOK()
			if !ok {
				ferr = bad("wallTime", "date", fmt.Errorf("got %s", val.Type))
				break
			}
			ev.wallTime = time.UnixMilli(ms).UTC()
		case "ns":
			ns, err := cache.decode(val)
			if err != nil {
				ferr = bad("ns", "document", err)
				break
			}
			ev.ns = ns
		case "to":
			ns, err := decodeNamespace(val)
			if err != nil {
				ferr = bad("to", "document", err)
				break
			}
			ev.to, ev.hasTo = ns, true
		case "documentKey":
			doc, ok := val.DocumentOK()
			if !ok {
				ferr = bad("documentKey", "document", fmt.Errorf("got %s", val.Type))
				break
			}
			ev.documentKey = bson.Raw(doc)
		case "fullDocument":
			doc, err := decodeDocument[T](val)
			if err != nil {
				ferr = bad("fullDocument", typeName[T](), err)
				break
			}
			ev.FullDocument = doc
		case "fullDocumentBeforeChange":
			doc, err := decodeDocument[T](val)
			if err != nil {
				ferr = bad("fullDocumentBeforeChange", typeName[T](), err)
				break
			}
			ev.FullDocumentBeforeChange = doc
		case "updateDescription":
			ud, err := decodeUpdateDescription(val)
			if err != nil {
				ferr = bad("updateDescription", "document", err)
				break
			}
			ev.UpdateDescription = ud
		case "lsid":
			doc, ok := val.DocumentOK()
			if !ok {
				ferr = bad("lsid", "document", fmt.Errorf("got %s", val.Type))
				break
			}
			ev.txn.LSID, ev.hasLSID = bson.Raw(doc), true
		case "txnNumber":
			n, ok := val.AsInt64OK()
			if !ok {
				ferr = bad("txnNumber", "integer", fmt.Errorf("got %s", val.Type))
				break
			}
			ev.txn.TxnNumber, ev.hasTxnNum = n, true
		}
		switch {
		case ferr == nil:
		case hasOp || wants == nil:
			return ferr
		case early == nil:
			early = ferr // reported once the operation type is known to be wanted
		}
	}
	if early != nil {
		return early // no operation type was read: the first error in field order
	}
	if !hasID {
		return bad("_id", "document", errMissing)
	}
	if !hasOp {
		return bad("operationType", "string", errMissing)
	}
	return nil
}

// readOperationType reads a string value as an OperationType, without allocating for the known
// types.
func readOperationType(val bsoncore.Value) (OperationType, bool) {
	if val.Type != bsoncore.TypeString {
		return "", false
	}
	b, ok := readStringBytes(val.Data)
	if !ok {
		return "", false
	}
	for _, op := range knownOps {
		if string(b) == string(op) { // compared without a copy of b
			return op, true
		}
	}
	return OperationType(b), true
}

// readStringBytes returns the bytes of a BSON string value (int32 length, bytes, NUL) without
// copying them.
func readStringBytes(data []byte) ([]byte, bool) {
	n, rem, ok := bsoncore.ReadLength(data)
	if !ok || n < 1 || int(n) > len(rem) || rem[n-1] != 0 {
		return nil, false
	}
	return rem[:n-1], true
}

// decodeDocument decodes a document value into a new T; nil for null. A T of bson.Raw shares
// the event's bytes instead of copying them.
func decodeDocument[T any](val bsoncore.Value) (*T, error) {
	if val.Type == bsoncore.TypeNull || val.Type == bsoncore.TypeUndefined {
		return nil, nil
	}
	doc, ok := val.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("got BSON %s, want a document or null", val.Type)
	}
	out := new(T)
	if r, ok := any(out).(*bson.Raw); ok {
		*r = bson.Raw(doc)
		return out, nil
	}
	if err := bson.Unmarshal(doc, out); err != nil {
		return nil, err
	}
	return out, nil
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

func decodeNamespace(val bsoncore.Value) (Namespace, error) {
	doc, ok := val.DocumentOK()
	if !ok {
		return Namespace{}, fmt.Errorf("got %s", val.Type)
	}
	var ns Namespace
	if v, err := doc.LookupErr("db"); err == nil {
		if ns.DB, ok = v.StringValueOK(); !ok {
			return Namespace{}, fmt.Errorf("db: got %s, want string", v.Type)
		}
	}
	if v, err := doc.LookupErr("coll"); err == nil {
		if ns.Coll, ok = v.StringValueOK(); !ok {
			return Namespace{}, fmt.Errorf("coll: got %s, want string", v.Type)
		}
	}
	return ns, nil
}

func decodeUpdateDescription(val bsoncore.Value) (*UpdateDescription, error) {
	doc, ok := val.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("got %s", val.Type)
	}
	ud := &UpdateDescription{}
	if v, err := doc.LookupErr("updatedFields"); err == nil {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, fmt.Errorf("updatedFields: got %s, want document", v.Type)
		}
		ud.UpdatedFields = bson.Raw(d)
	}
	if v, err := doc.LookupErr("removedFields"); err == nil {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, fmt.Errorf("removedFields: got %s, want array", v.Type)
		}
		vals, err := arr.Values()
		if err != nil {
			return nil, fmt.Errorf("removedFields: %w", err)
		}
		ud.RemovedFields = make([]string, 0, len(vals))
		for _, x := range vals {
			s, ok := x.StringValueOK()
			if !ok {
				return nil, fmt.Errorf("removedFields: got %s element, want string", x.Type)
			}
			ud.RemovedFields = append(ud.RemovedFields, s)
		}
	}
	if v, err := doc.LookupErr("truncatedArrays"); err == nil {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, fmt.Errorf("truncatedArrays: got %s, want array", v.Type)
		}
		vals, err := arr.Values()
		if err != nil {
			return nil, fmt.Errorf("truncatedArrays: %w", err)
		}
		for _, x := range vals {
			d, ok := x.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("truncatedArrays: got %s element, want document", x.Type)
			}
			field, ok := d.Lookup("field").StringValueOK()
			if !ok {
				return nil, errors.New("truncatedArrays: element without a string field")
			}
			n, ok := d.Lookup("newSize").AsInt64OK()
			if !ok {
				return nil, errors.New("truncatedArrays: element without a numeric newSize")
			}
			ud.TruncatedArrays = append(ud.TruncatedArrays, TruncatedArray{Field: field, NewSize: int(n)})
		}
	}
	return ud, nil
}
