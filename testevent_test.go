package watchtree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type testProduct struct {
	ID    int64   `bson:"_id"`
	Price float64 `bson:"price"`
}

func TestTestEventDefaults(t *testing.T) {
	a, err := TestEvent[testProduct]{FullDocument: &testProduct{ID: 7, Price: 9.5}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := TestEvent[testProduct]{FullDocument: &testProduct{ID: 7, Price: 9.5}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() == "" || a.ID() == b.ID() {
		t.Errorf("IDs %q and %q: want two distinct, non-empty IDs", a.ID(), b.ID())
	}
	if a.OperationType() != OpInsert || a.Stream() != "test" || a.Attempt() != 1 || a.Namespace() != (Namespace{"test", "test"}) {
		t.Errorf("defaults: op %q, stream %q, attempt %d, ns %v", a.OperationType(), a.Stream(), a.Attempt(), a.Namespace())
	}
	if id, ok := a.DocumentID().AsInt64OK(); !ok || id != 7 {
		t.Errorf("DocumentID = %v, want 7 from the FullDocument's _id", a.DocumentID())
	}
	if a.FullDocument == nil || *a.FullDocument != (testProduct{ID: 7, Price: 9.5}) {
		t.Errorf("FullDocument = %+v", a.FullDocument)
	}
	// The ID is the resume token's _data, whose cluster time reads back as a server's would.
	at, ok := TokenClusterTime(a.ResumeToken())
	if !ok || at.Unix() != int64(a.ClusterTime().T) || !a.WallTime().Equal(at) {
		t.Errorf("token time %v (%v), cluster time %v, wall time %v", at, ok, a.ClusterTime(), a.WallTime())
	}
	if data, _ := a.ResumeToken().Lookup("_data").StringValueOK(); data != a.ID() {
		t.Errorf("token _data %q, ID %q", data, a.ID())
	}
	if op, _ := a.Raw().Lookup("operationType").StringValueOK(); op != "insert" {
		t.Errorf("Raw operationType %q", op)
	}
}

func TestTestEventFieldsAsGiven(t *testing.T) {
	ts := bson.Timestamp{T: 1700000000, I: 3}
	updated, _ := bson.Marshal(bson.D{{Key: "price", Value: 11.0}})
	ev, err := TestEvent[testProduct]{
		Stream:                   "products",
		OperationType:            OpUpdate,
		Namespace:                Namespace{DB: "shop", Coll: "products"},
		DocumentKey:              bson.D{{Key: "_id", Value: int64(3)}},
		FullDocumentBeforeChange: &testProduct{ID: 3, Price: 10},
		UpdateDescription:        &UpdateDescription{UpdatedFields: updated, RemovedFields: []string{"sale"}, TruncatedArrays: []TruncatedArray{{Field: "tags", NewSize: 1}}},
		ClusterTime:              ts,
		WallTime:                 time.UnixMilli(1700000000123),
		ID:                       "82FEED",
		Attempt:                  3,
	}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID() != "82FEED" || ev.Attempt() != 3 || ev.Stream() != "products" || ev.ClusterTime() != ts ||
		!ev.WallTime().Equal(time.UnixMilli(1700000000123)) || ev.Namespace().String() != "shop.products" {
		t.Errorf("event %q attempt %d stream %q ts %v wall %v ns %v", ev.ID(), ev.Attempt(), ev.Stream(), ev.ClusterTime(), ev.WallTime(), ev.Namespace())
	}
	if ev.FullDocument != nil || ev.FullDocumentBeforeChange == nil || ev.FullDocumentBeforeChange.Price != 10 {
		t.Errorf("documents %+v / %+v", ev.FullDocument, ev.FullDocumentBeforeChange)
	}
	for path, want := range map[string]bool{"price": true, "sale": true, "tags.2": true, "tags.0": false, "name": false} {
		if got := ev.Changed(path); got != want {
			t.Errorf("Changed(%q) = %v, want %v", path, got, want)
		}
	}
}

// lyingProduct marshals its price as a string, which does not decode back into it.
type lyingProduct struct {
	Price float64 `bson:"price"`
}

func (lyingProduct) MarshalBSON() ([]byte, error) {
	return bson.Marshal(bson.D{{Key: "price", Value: "ten"}})
}

func TestTestEventErrors(t *testing.T) {
	if _, err := (TestEvent[testProduct]{DocumentKey: 42}).Build(); err == nil || !strings.Contains(err.Error(), "TestEvent.DocumentKey") {
		t.Errorf("a DocumentKey that is not a document: %v, want an error naming TestEvent.DocumentKey", err)
	}
	type unmarshalable struct{ C chan int }
	if _, err := (TestEvent[unmarshalable]{FullDocument: &unmarshalable{}}).Build(); err == nil || !strings.Contains(err.Error(), "TestEvent.FullDocument") {
		t.Errorf("a document with a channel: %v, want an error naming TestEvent.FullDocument", err)
	}
	// A document that does not decode back into T: the *DecodeError a stream would dead-letter.
	var de *DecodeError
	if _, err := (TestEvent[lyingProduct]{FullDocument: &lyingProduct{}}).Build(); !errors.As(err, &de) || de.Field != "fullDocument" {
		t.Errorf("a document that does not decode: %v, want a *DecodeError on fullDocument", err)
	}
}

// ExampleTestEvent unit-tests a handler: the same event twice (a redelivery) is charged once.
func ExampleTestEvent() {
	type Order struct {
		ID     int64   `bson:"_id"`
		Amount float64 `bson:"amount"`
	}
	charged := map[string]float64{} // payments, by event ID
	charge := func(_ context.Context, ev *Event[Order]) error {
		if _, ok := charged[ev.ID()]; !ok {
			charged[ev.ID()] = ev.FullDocument.Amount
		}
		return nil
	}
	ev, err := TestEvent[Order]{FullDocument: &Order{ID: 1, Amount: 25}}.Build()
	if err != nil {
		panic(err)
	}
	_ = charge(context.Background(), ev)
	_ = charge(context.Background(), ev) // redelivered
	id, _ := ev.DocumentID().AsInt64OK()
	fmt.Println(len(charged), "payment for order", id)
	// Output: 1 payment for order 1
}
