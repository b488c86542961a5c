package watchtree

import (
	"fmt"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestEvent describes a change event for a unit test of a handler: Build makes the *Event[T] a
// stream would pass the handler, without a server. It writes the change event document the
// server would send (Event.Raw) and decodes it the way a stream does, so the handler sees the
// same Event: ID, ResumeToken, DocumentKey, DocumentID, Changed and the decoded documents all
// behave as in production.
//
// The zero value of every field means its documented default; a zero TestEvent is an insert
// with no document.
type TestEvent[T any] struct {
	// Stream is the stream name (Event.Stream). Default "test".
	Stream string
	// OperationType is the event's operation type. Default OpInsert.
	OperationType OperationType
	// Namespace is where the change happened. Default {DB: "test", Coll: "test"}.
	Namespace Namespace
	// DocumentKey is the documentKey, any value that marshals to a BSON document (bson.D,
	// bson.M, a struct). Default {_id: <the _id of FullDocument, else of
	// FullDocumentBeforeChange>}; none when neither has an _id.
	DocumentKey any
	// FullDocument and FullDocumentBeforeChange are the documents (post- and pre-image); nil
	// means none. They are marshalled and decoded back into T, as the server's would be.
	FullDocument, FullDocumentBeforeChange *T
	// UpdateDescription is the update's description (update events); nil means none.
	UpdateDescription *UpdateDescription
	// ClusterTime is the event's cluster time. Default: the current second, with an increment
	// unique in the process, so that every built event has its own ID.
	ClusterTime bson.Timestamp
	// WallTime is the server's wall-clock time of the write. Default ClusterTime's second.
	WallTime time.Time
	// ID is the event ID (Event.ID, the _data of the resume token). Default the hex key a
	// server writes for ClusterTime ("82" + 8 bytes of timestamp), which TokenClusterTime
	// reads back.
	ID string
	// Attempt is Event.Attempt, the 1-based handler call. Default 1.
	Attempt int
}

// testEventSeq makes the default ClusterTime increments unique in the process.
var testEventSeq atomic.Uint32

// Build returns the event. It fails when a document or DocumentKey does not marshal to BSON,
// or a document does not decode back into T (the *DecodeError a stream would dead-letter).
func (te TestEvent[T]) Build() (*Event[T], error) {
	if te.Stream == "" {
		te.Stream = "test"
	}
	if te.OperationType == "" {
		te.OperationType = OpInsert
	}
	if te.ClusterTime == (bson.Timestamp{}) {
		te.ClusterTime = bson.Timestamp{T: uint32(time.Now().Unix()), I: testEventSeq.Add(1)}
	}
	if te.WallTime.IsZero() {
		te.WallTime = time.Unix(int64(te.ClusterTime.T), 0)
	}
	if te.ID == "" {
		te.ID = fmt.Sprintf("82%08X%08X", te.ClusterTime.T, te.ClusterTime.I)
	}
	if te.Attempt == 0 {
		te.Attempt = 1
	}
	where := te.Namespace
	if where == (Namespace{}) {
		where = Namespace{DB: "test", Coll: "test"}
	}
	ns := bson.D{{Key: "db", Value: where.DB}}
	if where.Coll != "" {
		ns = append(ns, bson.E{Key: "coll", Value: where.Coll})
	}
	doc := bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: te.ID}}},
		{Key: "operationType", Value: string(te.OperationType)},
		{Key: "clusterTime", Value: te.ClusterTime},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(te.WallTime)},
		{Key: "ns", Value: ns},
	}
	var full, before bson.Raw
	var err error
	if te.FullDocument != nil {
		if full, err = bson.Marshal(te.FullDocument); err != nil {
			return nil, fmt.Errorf("watchtree: TestEvent.FullDocument: %w", err)
		}
	}
	if te.FullDocumentBeforeChange != nil {
		if before, err = bson.Marshal(te.FullDocumentBeforeChange); err != nil {
			return nil, fmt.Errorf("watchtree: TestEvent.FullDocumentBeforeChange: %w", err)
		}
	}
	key := te.DocumentKey
	if key == nil {
		for _, d := range []bson.Raw{full, before} {
			if d == nil {
				continue
			}
			if id, err := d.LookupErr("_id"); err == nil {
				key = bson.D{{Key: "_id", Value: id}}
				break
			}
		}
	}
	if key != nil {
		raw, err := bson.Marshal(key)
		if err != nil {
			return nil, fmt.Errorf("watchtree: TestEvent.DocumentKey: %w", err)
		}
		doc = append(doc, bson.E{Key: "documentKey", Value: bson.Raw(raw)})
	}
	if full != nil {
		doc = append(doc, bson.E{Key: "fullDocument", Value: full})
	}
	if before != nil {
		doc = append(doc, bson.E{Key: "fullDocumentBeforeChange", Value: before})
	}
	if u := te.UpdateDescription; u != nil {
		updated := u.UpdatedFields
		if updated == nil {
			updated = bson.Raw{5, 0, 0, 0, 0} // {}
		}
		removed := bson.A{}
		for _, f := range u.RemovedFields {
			removed = append(removed, f)
		}
		truncated := bson.A{}
		for _, ta := range u.TruncatedArrays {
			truncated = append(truncated, bson.D{{Key: "field", Value: ta.Field}, {Key: "newSize", Value: int32(ta.NewSize)}})
		}
		doc = append(doc, bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: updated},
			{Key: "removedFields", Value: removed}, {Key: "truncatedArrays", Value: truncated}}})
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("watchtree: TestEvent: %w", err)
	}
	return decodeEvent[T](raw, te.Stream, te.Attempt)
}
