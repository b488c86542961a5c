package watchtree

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type testOrder struct {
	ID     int    `bson:"_id"`
	Total  int    `bson:"total"`
	Status string `bson:"status,omitempty"`
}

var (
	testWall = time.Date(2024, 9, 22, 10, 13, 20, 123e6, time.UTC)
	testTS   = bson.Timestamp{T: 1727000000, I: 3}
)

// changeEvent builds a change event document shaped like a real server's, with op and the
// extra fields appended.
func changeEvent(t testing.TB, op string, data string, extra ...bson.E) bson.Raw {
	t.Helper()
	d := bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: data}}},
		{Key: "operationType", Value: op},
		{Key: "clusterTime", Value: testTS},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(testWall)},
	}
	d = append(d, extra...)
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func nsDoc(db, coll string) bson.D {
	if coll == "" {
		return bson.D{{Key: "db", Value: db}}
	}
	return bson.D{{Key: "db", Value: db}, {Key: "coll", Value: coll}}
}

func TestDecodeEvent(t *testing.T) {
	ns := bson.E{Key: "ns", Value: nsDoc("shop", "orders")}
	key := bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(7)}}}
	type want struct {
		op        OperationType
		ns        Namespace
		to        *Namespace
		docID     int32 // 0: no document key
		full      *testOrder
		before    *testOrder
		update    *UpdateDescription
		txn       *TxnInfo
		knownType bool
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{1}, 16)}}}
	lsidRaw, _ := bson.Marshal(lsid)
	updatedRaw, _ := bson.Marshal(bson.D{{Key: "total", Value: int32(12)}, {Key: "items.1.qty", Value: int32(3)}})
	tests := []struct {
		name string
		raw  bson.Raw
		want want
	}{
		{"insert", changeEvent(t, "insert", "8201", ns, key,
			bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 7}, {Key: "total", Value: 10}}}),
			want{op: OpInsert, ns: Namespace{"shop", "orders"}, docID: 7, full: &testOrder{ID: 7, Total: 10}, knownType: true}},
		{"update without lookup", changeEvent(t, "update", "8202", ns, key,
			bson.E{Key: "updateDescription", Value: bson.D{
				{Key: "updatedFields", Value: bson.Raw(updatedRaw)},
				{Key: "removedFields", Value: bson.A{"status", "note"}},
				{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "items"}, {Key: "newSize", Value: int32(2)}}}},
			}}),
			want{op: OpUpdate, ns: Namespace{"shop", "orders"}, docID: 7, knownType: true,
				update: &UpdateDescription{UpdatedFields: updatedRaw, RemovedFields: []string{"status", "note"},
					TruncatedArrays: []TruncatedArray{{Field: "items", NewSize: 2}}}}},
		{"update with lookup of a deleted document and a pre-image", changeEvent(t, "update", "8203", ns, key,
			bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{}}, {Key: "removedFields", Value: bson.A{}}}},
			bson.E{Key: "fullDocument", Value: nil},
			bson.E{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: 7}, {Key: "total", Value: 9}, {Key: "status", Value: "new"}}}),
			want{op: OpUpdate, ns: Namespace{"shop", "orders"}, docID: 7, knownType: true,
				before: &testOrder{ID: 7, Total: 9, Status: "new"},
				update: &UpdateDescription{UpdatedFields: bson.Raw{5, 0, 0, 0, 0}, RemovedFields: []string{}}}},
		{"replace", changeEvent(t, "replace", "8204", ns, key,
			bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 7}, {Key: "total", Value: 1}}}),
			want{op: OpReplace, ns: Namespace{"shop", "orders"}, docID: 7, full: &testOrder{ID: 7, Total: 1}, knownType: true}},
		{"delete with a null pre-image", changeEvent(t, "delete", "8205", ns, key,
			bson.E{Key: "fullDocumentBeforeChange", Value: nil}),
			want{op: OpDelete, ns: Namespace{"shop", "orders"}, docID: 7, knownType: true}},
		{"drop", changeEvent(t, "drop", "8206", ns), want{op: OpDrop, ns: Namespace{"shop", "orders"}, knownType: true}},
		{"rename", changeEvent(t, "rename", "8207", ns, bson.E{Key: "to", Value: nsDoc("shop", "orders2")}),
			want{op: OpRename, ns: Namespace{"shop", "orders"}, to: &Namespace{"shop", "orders2"}, knownType: true}},
		{"dropDatabase", changeEvent(t, "dropDatabase", "8208", bson.E{Key: "ns", Value: nsDoc("shop", "")}),
			want{op: OpDropDatabase, ns: Namespace{DB: "shop"}, knownType: true}},
		{"invalidate", changeEvent(t, "invalidate", "8209"), want{op: OpInvalidate, knownType: true}},
		{"transaction", changeEvent(t, "insert", "820A", ns, key,
			bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 7}}},
			bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: int64(42)}),
			want{op: OpInsert, ns: Namespace{"shop", "orders"}, docID: 7, full: &testOrder{ID: 7}, knownType: true,
				txn: &TxnInfo{LSID: lsidRaw, TxnNumber: 42}}},
		{"lsid without txnNumber is no transaction", changeEvent(t, "delete", "820B", ns, key, bson.E{Key: "lsid", Value: lsid}),
			want{op: OpDelete, ns: Namespace{"shop", "orders"}, docID: 7, knownType: true}},
		{"expanded event with unknown fields", changeEvent(t, "createIndexes", "820C", ns,
			bson.E{Key: "collectionUUID", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
			bson.E{Key: "operationDescription", Value: bson.D{{Key: "indexes", Value: bson.A{}}}}),
			want{op: "createIndexes", ns: Namespace{"shop", "orders"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := decodeEvent[testOrder](tt.raw, "orders", 2)
			if err != nil {
				t.Fatalf("decodeEvent: %v", err)
			}
			w := tt.want
			if ev.OperationType() != w.op || ev.OperationType().Known() != w.knownType {
				t.Errorf("op = %q known=%v, want %q known=%v", ev.OperationType(), ev.OperationType().Known(), w.op, w.knownType)
			}
			data := tt.raw.Lookup("_id", "_data").StringValue()
			if ev.ID() != data {
				t.Errorf("ID = %q, want %q", ev.ID(), data)
			}
			if !bytes.Equal(ev.ResumeToken(), tt.raw.Lookup("_id").Document()) {
				t.Errorf("ResumeToken = %v", ev.ResumeToken())
			}
			if !bytes.Equal(ev.Raw(), tt.raw) || ev.Stream() != "orders" || ev.Attempt() != 2 {
				t.Errorf("Raw/Stream/Attempt = %v %q %d", ev.Raw(), ev.Stream(), ev.Attempt())
			}
			if ev.ClusterTime() != testTS || !ev.WallTime().Equal(testWall) || ev.WallTime().Location() != time.UTC {
				t.Errorf("times = %v %v", ev.ClusterTime(), ev.WallTime())
			}
			if ev.Namespace() != w.ns {
				t.Errorf("Namespace = %+v, want %+v", ev.Namespace(), w.ns)
			}
			to, ok := ev.To()
			if (w.to != nil) != ok || (ok && to != *w.to) {
				t.Errorf("To = %+v %v, want %+v", to, ok, w.to)
			}
			if w.docID != 0 {
				if id, ok := ev.DocumentID().Int32OK(); !ok || id != w.docID {
					t.Errorf("DocumentID = %v", ev.DocumentID())
				}
				if ev.DocumentKey() == nil {
					t.Error("DocumentKey is nil")
				}
			} else if ev.DocumentKey() != nil || !ev.DocumentID().IsZero() {
				t.Errorf("DocumentKey = %v, want none", ev.DocumentKey())
			}
			checkDoc(t, "FullDocument", ev.FullDocument, w.full)
			checkDoc(t, "FullDocumentBeforeChange", ev.FullDocumentBeforeChange, w.before)
			checkUpdate(t, ev.UpdateDescription, w.update)
			txn, ok := ev.Txn()
			if (w.txn != nil) != ok || (ok && (txn.TxnNumber != w.txn.TxnNumber || !bytes.Equal(txn.LSID, w.txn.LSID))) {
				t.Errorf("Txn = %+v %v, want %+v", txn, ok, w.txn)
			}
		})
	}
}

func checkDoc(t *testing.T, name string, got, want *testOrder) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", name, got, want)
	case *got != *want:
		t.Errorf("%s = %+v, want %+v", name, *got, *want)
	}
}

func checkUpdate(t *testing.T, got, want *UpdateDescription) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("UpdateDescription = %+v, want %+v", got, want)
	}
	if got == nil {
		return
	}
	if !bytes.Equal(got.UpdatedFields, want.UpdatedFields) {
		t.Errorf("UpdatedFields = %v, want %v", got.UpdatedFields, want.UpdatedFields)
	}
	if strings.Join(got.RemovedFields, ",") != strings.Join(want.RemovedFields, ",") || (got.RemovedFields == nil) != (want.RemovedFields == nil) {
		t.Errorf("RemovedFields = %#v, want %#v", got.RemovedFields, want.RemovedFields)
	}
	if len(got.TruncatedArrays) != len(want.TruncatedArrays) {
		t.Fatalf("TruncatedArrays = %+v, want %+v", got.TruncatedArrays, want.TruncatedArrays)
	}
	for i := range got.TruncatedArrays {
		if got.TruncatedArrays[i] != want.TruncatedArrays[i] {
			t.Errorf("TruncatedArrays[%d] = %+v, want %+v", i, got.TruncatedArrays[i], want.TruncatedArrays[i])
		}
	}
}

// TestEventIDStableAcrossRedeliveries decodes the same raw event twice (a redelivery after a
// crash) and a second event: IDs are equal for the same event, different across events.
func TestEventIDStableAcrossRedeliveries(t *testing.T) {
	a1 := changeEvent(t, "insert", "8266EFEDC000000001", bson.E{Key: "fullDocument", Value: bson.D{}})
	a2 := append(bson.Raw(nil), a1...)
	b := changeEvent(t, "insert", "8266EFEDC000000002", bson.E{Key: "fullDocument", Value: bson.D{}})
	e1, _ := decodeEvent[bson.M](a1, "s", 1)
	e2, _ := decodeEvent[bson.M](a2, "s", 3)
	e3, _ := decodeEvent[bson.M](b, "s", 1)
	if e1.ID() != e2.ID() || e1.ID() == e3.ID() || e1.ID() != "8266EFEDC000000001" {
		t.Fatalf("IDs %q %q %q", e1.ID(), e2.ID(), e3.ID())
	}
}

func TestDecodeEventDocumentTypes(t *testing.T) {
	raw := changeEvent(t, "insert", "82", bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: "k"}, {Key: "n", Value: int32(5)}}})

	rawEv, err := decodeEvent[bson.Raw](raw, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	doc := *rawEv.FullDocument
	if doc.Lookup("n").Int32() != 5 {
		t.Fatalf("bson.Raw document = %v", doc)
	}
	// A bson.Raw T shares the event's bytes instead of copying them.
	if start := bytes.Index(raw, doc); start < 0 || &raw[start] != &doc[0] {
		t.Error("bson.Raw FullDocument does not alias the raw event")
	}

	mEv, err := decodeEvent[bson.M](raw, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	if (*mEv.FullDocument)["_id"] != "k" || (*mEv.FullDocument)["n"] != int32(5) {
		t.Fatalf("bson.M document = %v", *mEv.FullDocument)
	}

	dEv, err := decodeEvent[bson.D](raw, "s", 1)
	if err != nil || len(*dEv.FullDocument) != 2 {
		t.Fatalf("bson.D document = %v, %v", dEv.FullDocument, err)
	}
}

func TestDecodeEventErrors(t *testing.T) {
	ns := bson.E{Key: "ns", Value: nsDoc("db", "c")}
	good := changeEvent(t, "insert", "82", ns)
	mustMarshal := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name, field, typ, msg string
		raw                   bson.Raw
	}{
		{"empty", "", "", `watchtree: Stream "orders": cannot decode change event: malformed BSON document (0 bytes)`, nil},
		{"truncated", "", "", "", good[:len(good)-3]},
		{"length mismatch", "", "", "", append(append(bson.Raw(nil), good...), 0)},
		{"no _id", "_id", "document", `watchtree: Stream "orders": cannot decode _id into document: missing`,
			mustMarshal(bson.D{{Key: "operationType", Value: "insert"}})},
		{"_id not a document", "_id", "document", "", mustMarshal(bson.D{{Key: "_id", Value: "x"}, {Key: "operationType", Value: "insert"}})},
		{"_data not a string", "_id._data", "string", "", mustMarshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: 1}}}})},
		{"no operationType", "operationType", "string", "", mustMarshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}})},
		{"operationType not a string", "operationType", "string", "", changeEvent(t, "insert", "82", bson.E{Key: "operationType", Value: 3})},
		{"clusterTime wrong", "clusterTime", "timestamp", "", changeEvent(t, "insert", "82", bson.E{Key: "clusterTime", Value: int64(1)})},
		{"wallTime wrong", "wallTime", "date", "", changeEvent(t, "insert", "82", bson.E{Key: "wallTime", Value: "now"})},
		{"ns wrong", "ns", "document", "", changeEvent(t, "insert", "82", bson.E{Key: "ns", Value: "db.c"})},
		{"ns.coll wrong", "ns", "document", "", changeEvent(t, "insert", "82", bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: 1}}})},
		{"to wrong", "to", "document", "", changeEvent(t, "rename", "82", bson.E{Key: "to", Value: bson.D{{Key: "db", Value: 1}}})},
		{"documentKey wrong", "documentKey", "document", "", changeEvent(t, "insert", "82", bson.E{Key: "documentKey", Value: 1})},
		{"fullDocument does not fit T", "fullDocument", "watchtree.testOrder", "",
			changeEvent(t, "insert", "82", bson.E{Key: "fullDocument", Value: bson.D{{Key: "total", Value: "ten"}}})},
		{"fullDocument not a document", "fullDocument", "watchtree.testOrder", "",
			changeEvent(t, "insert", "82", bson.E{Key: "fullDocument", Value: "x"})},
		{"pre-image does not fit T", "fullDocumentBeforeChange", "watchtree.testOrder", "",
			changeEvent(t, "delete", "82", bson.E{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: "str"}}})},
		{"updateDescription wrong", "updateDescription", "document", "", changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: 1})},
		{"updatedFields wrong", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: 1}}})},
		{"removedFields wrong", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "removedFields", Value: "a"}}})},
		{"removedFields element wrong", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "removedFields", Value: bson.A{1}}}})},
		{"truncatedArrays wrong", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "truncatedArrays", Value: 1}}})},
		{"truncatedArrays element wrong", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "truncatedArrays", Value: bson.A{1}}}})},
		{"truncatedArrays without newSize", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "a"}}}}}})},
		{"truncatedArrays without field", "updateDescription", "document", "",
			changeEvent(t, "update", "82", bson.E{Key: "updateDescription", Value: bson.D{{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "newSize", Value: 1}}}}}})},
		{"lsid wrong", "lsid", "document", "", changeEvent(t, "insert", "82", bson.E{Key: "lsid", Value: 1})},
		{"txnNumber wrong", "txnNumber", "integer", "", changeEvent(t, "insert", "82", bson.E{Key: "txnNumber", Value: "1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := decodeEvent[testOrder](tt.raw, "orders", 1)
			if err == nil {
				t.Fatalf("decoded %+v, want an error", ev)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Stream != "orders" || de.Field != tt.field || de.Type != tt.typ {
				t.Errorf("DecodeError{Stream %q, Field %q, Type %q}, want {orders, %q, %q}: %v", de.Stream, de.Field, de.Type, tt.field, tt.typ, err)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("Error() = %q, want %q", err.Error(), tt.msg)
			}
			if !IsPermanent(err) {
				t.Error("a decode error must be permanent")
			}
		})
	}
}

func TestUpdateDescriptionChanged(t *testing.T) {
	updated, _ := bson.Marshal(bson.D{
		{Key: "status", Value: "paid"},
		{Key: "address", Value: bson.D{{Key: "city", Value: "Lyon"}}},
		{Key: "items.1.qty", Value: 3},
	})
	u := &UpdateDescription{
		UpdatedFields:   updated,
		RemovedFields:   []string{"note", "meta.tags"},
		TruncatedArrays: []TruncatedArray{{Field: "history", NewSize: 2}, {Field: "a.b", NewSize: 0}},
	}
	tests := []struct {
		path string
		want bool
	}{
		{"status", true},                         // updated itself
		{"status.code", true},                    // parent updated: the sub-value was replaced
		{"stat", false},                          // prefix of a name is not a parent
		{"statusx", false},                       // nor is a longer name
		{"address", true},                        // updated itself
		{"address.city", true},                   // parent was set
		{"address.zip", true},                    // parent was set: zip is gone or changed
		{"items", true},                          // child changed
		{"items.1", true},                        // child changed
		{"items.1.qty", true},                    // exact
		{"items.1.price", false},                 // sibling of a changed leaf
		{"items.0", false},                       // other element
		{"items.1.qty.x", true},                  // parent replaced
		{"note", true},                           // removed
		{"note.inner", true},                     // parent removed
		{"meta", true},                           // child removed
		{"meta.tags", true},                      // removed
		{"meta.owner", false},                    // sibling of removed
		{"history", true},                        // truncated array itself
		{"history.0", false},                     // kept element
		{"history.1", false},                     // kept element
		{"history.2", true},                      // removed element
		{"history.10.x", true},                   // inside a removed element
		{"history.1.x", false},                   // inside a kept element
		{"history.name", true},                   // non-numeric segment may have lived in a removed element
		{"history.-1", true},                     // not an index: conservative
		{"a", true},                              // parent of a truncated array
		{"a.b.0", true},                          // newSize 0: every element removed
		{"a.c", false},                           // sibling of the truncated array
		{"total", false},                         // untouched
		{"", true},                               // the root: something changed
		{"addresses", false},                     // unrelated, shares a prefix
		{"items.1.qtyx", false},                  // shares a prefix with a leaf
		{"meta.tags.0", true},                    // under a removed field
		{"history.2extra", true},                 // non-numeric segment
		{"history.01", false},                    // numeric with a leading zero: index 1, kept
		{"history.9999999999999999999999", true}, // not representable: conservative
	}
	for _, tt := range tests {
		if got := u.Changed(tt.path); got != tt.want {
			t.Errorf("Changed(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	var nilU *UpdateDescription
	if nilU.Changed("x") || nilU.Changed("") {
		t.Error("nil UpdateDescription must report no change")
	}
	empty := &UpdateDescription{UpdatedFields: bson.Raw{5, 0, 0, 0, 0}, RemovedFields: []string{}}
	if empty.Changed("") || empty.Changed("x") {
		t.Error("an empty description must report no change, even at the root")
	}
}

func TestEventChanged(t *testing.T) {
	upd := bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "status", Value: "x"}}}}}
	tests := []struct {
		name string
		raw  bson.Raw
		path string
		want bool
	}{
		{"update, changed path", changeEvent(t, "update", "82", upd), "status", true},
		{"update, other path", changeEvent(t, "update", "82", upd), "total", false},
		{"update without description", changeEvent(t, "update", "82"), "total", true},
		{"insert", changeEvent(t, "insert", "82"), "total", true},
		{"replace", changeEvent(t, "replace", "82"), "total", true},
		{"delete", changeEvent(t, "delete", "82"), "total", true},
		{"drop", changeEvent(t, "drop", "82"), "total", false},
		{"invalidate", changeEvent(t, "invalidate", "82"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := decodeEvent[bson.M](tt.raw, "s", 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := ev.Changed(tt.path); got != tt.want {
				t.Errorf("Changed(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestNamespaceString(t *testing.T) {
	if got := (Namespace{DB: "d", Coll: "c"}).String(); got != "d.c" {
		t.Errorf("got %q", got)
	}
	if got := (Namespace{DB: "d"}).String(); got != "d" {
		t.Errorf("got %q", got)
	}
}

// TestFillEventWants checks the router's one-walk decode: an event whose operation type has no
// handler stops at it and never fails, whatever else it holds; a wanted one reports its first
// field error in field order, including one met before the operation type.
func TestFillEventWants(t *testing.T) {
	onlyInserts := func(op OperationType) bool { return op == OpInsert }
	marshal := func(d bson.D) bson.Raw {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	badDoc := bson.E{Key: "fullDocument", Value: "not a document"}
	cases := []struct {
		name      string
		raw       bson.Raw
		wantErr   error  // errNotWanted, or nil for a DecodeError or success
		wantField string // the DecodeError's field; "" for success
	}{
		{"unwanted, damaged document", changeEvent(t, "update", "82", badDoc), errNotWanted, ""},
		{"unwanted, damaged _id before the type", marshal(bson.D{{Key: "_id", Value: "x"}, {Key: "operationType", Value: "update"}}), errNotWanted, ""},
		{"wanted, damaged _id before the type", marshal(bson.D{{Key: "_id", Value: "x"}, {Key: "operationType", Value: "insert"}}), nil, "_id"},
		{"wanted, damaged document", changeEvent(t, "insert", "82", badDoc), nil, "fullDocument"},
		{"no type, damaged _id first", marshal(bson.D{{Key: "_id", Value: "x"}, {Key: "fullDocument", Value: bson.D{}}}), nil, "_id"},
		{"no type", marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}}), nil, "operationType"},
		{"wanted, whole", changeEvent(t, "insert", "82", bson.E{Key: "fullDocument", Value: bson.D{{Key: "a", Value: 1}}}), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event[bson.M]
			err := fillEvent(&ev, tc.raw, "s", 1, nil, onlyInserts)
			var de *DecodeError
			switch {
			case tc.wantErr != nil:
				if err != tc.wantErr {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if ev.FullDocument != nil {
					t.Error("an unwanted event's document was decoded")
				}
			case tc.wantField != "":
				if !errors.As(err, &de) || de.Field != tc.wantField {
					t.Fatalf("err = %v, want a DecodeError of field %q", err, tc.wantField)
				}
			default:
				if err != nil || ev.FullDocument == nil || (*ev.FullDocument)["a"] != int32(1) {
					t.Fatalf("err = %v, document %v", err, ev.FullDocument)
				}
			}
		})
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	raw := changeEvent(b, "insert", "8266EFEDC000000001", bson.E{Key: "ns", Value: nsDoc("shop", "orders")},
		bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: 7}}},
		bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 7}, {Key: "total", Value: 10}, {Key: "status", Value: "new"}}})
	b.Run("struct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeEvent[testOrder](raw, "s", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeEvent[bson.Raw](raw, "s", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFillEventAllocations pins the envelope decode of the lane path: with a bson.Raw document
// type (no document copy) and the namespace cached, decoding an insert into a reused Event
// allocates only the FullDocument, which the handler may keep; the event's ID string is made
// only when ID is called.
func TestFillEventAllocations(t *testing.T) {
	raw := changeEvent(t, "insert", "8266EFEDC000000001",
		bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: int32(7)}, {Key: "x", Value: "y"}}},
		bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(7)}}})
	var cache nsCache
	var ev Event[bson.Raw]
	if err := fillEvent(&ev, raw, "s", 1, &cache, nil); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		ev = Event[bson.Raw]{}
		if err := fillEvent(&ev, raw, "s", 1, &cache, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("fillEvent allocates %v times per event, want 1 (the FullDocument)", n)
	}
	if got := ev.ID(); got != "8266EFEDC000000001" {
		t.Errorf("ID = %q", got)
	}
}
