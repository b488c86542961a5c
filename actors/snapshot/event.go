package snapshot

import (
	"encoding/hex"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// operationType is the operationType of a snapshot event.
const operationType = "snapshot"

// idPrefix starts the _id._data (the event ID) of every snapshot event:
// "snapshot:<snapshot id>:<db>.<coll>:<hex of the _id value, type byte first>".
const idPrefix = "snapshot:"

// errNoID is the error of a document without an _id (which a collection cannot hold).
var errNoID = errors.New("snapshot: document without _id")

// idOf returns {_id: value} of doc.
func idOf(doc bson.Raw) (bson.Raw, error) {
	v, err := bsoncore.Document(doc).LookupErr("_id")
	if err != nil {
		return nil, errNoID
	}
	return bson.Raw(bsoncore.BuildDocumentFromElements(nil, bsoncore.AppendValueElement(nil, "_id", v))), nil
}

// eventBuilder builds the snapshot events of one snapshot.
type eventBuilder struct {
	prefix string // idPrefix + id + ":" + ns + ":"
	ns     bsoncore.Document
}

func newEventBuilder(snapshotID, db, coll string) eventBuilder {
	ns := bsoncore.NewDocumentBuilder().AppendString("db", db).AppendString("coll", coll).Build()
	return eventBuilder{prefix: idPrefix + snapshotID + ":" + db + "." + coll + ":", ns: ns}
}

// build returns the raw snapshot event of doc, whose {_id: value} is key, and the event's _id
// document (its stable identity).
func (b eventBuilder) build(doc, key bson.Raw) (raw, token bson.Raw) {
	v := bsoncore.Document(key).Index(0).Value()
	data := make([]byte, 0, len(b.prefix)+2+2*len(v.Data))
	data = append(data, b.prefix...)
	data = hex.AppendEncode(data, []byte{byte(v.Type)})
	data = hex.AppendEncode(data, v.Data)
	idx, tok := bsoncore.AppendDocumentStart(nil)
	tok = bsoncore.AppendStringElement(tok, "_data", string(data))
	tok, _ = bsoncore.AppendDocumentEnd(tok, idx)

	n := 64 + len(tok) + len(b.ns) + len(key) + len(doc)
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, n))
	out = bsoncore.AppendDocumentElement(out, "_id", tok)
	out = bsoncore.AppendStringElement(out, "operationType", operationType)
	out = bsoncore.AppendDocumentElement(out, "ns", b.ns)
	out = bsoncore.AppendDocumentElement(out, "documentKey", key)
	out = bsoncore.AppendDocumentElement(out, "fullDocument", doc)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, tok
}
