package stream

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/watchtree/watchtree/internal/rawbson"
)

// envelope is what the reader needs of a change event's top-level fields. scanEnvelope finds
// them in one walk of the event: the reader used to look each one up on its own (splitEvent,
// which is absent from almost every event and so cost a walk of the whole document, then _id,
// then operationType).
type envelope struct {
	id       []byte // the _id value's bytes (a sub-slice of the event); nil when absent
	op       []byte // the operationType string's bytes; nil when absent or not a string
	split    bson.RawValue
	hasSplit bool // a splitEvent field is present (whatever its type)
}

// scanEnvelope walks the top-level elements of raw once, reading each key once, without
// allocating. A malformed document yields what was found before the damage; the dispatcher's
// decode reports the damage against the event. With splits false (the cursor's pipeline has no
// $changeStreamSplitLargeEvent, so the server never splits an event) the walk ends as soon as
// _id and operationType are found, usually the first two fields, and a splitEvent field is not
// looked for.
func scanEnvelope(raw []byte, splits bool) envelope {
	var env envelope
	_, rem, ok := bsoncore.ReadLength(raw)
	if !ok {
		return env
	}
	for i := 0; splits || env.id == nil || env.op == nil; {
		t, k, end, ok := rawbson.ElementAt(rem, i) // ends at the trailing NUL
		if !ok {
			break
		}
		key, val := rem[i+1:k], rem[k+1:end:end]
		i = end
		switch string(key) { // no allocation: the compiler compares in place
		case "_id":
			if env.id == nil {
				env.id = val
			}
		case "operationType":
			if t == bsoncore.TypeString && len(val) >= 5 && env.op == nil {
				env.op = val[4 : len(val)-1] // int32 length, bytes, NUL
			}
		case "splitEvent":
			if splits && !env.hasSplit {
				env.split, env.hasSplit = bson.RawValue{Type: bson.Type(t), Value: val}, true
			}
		}
	}
	return env
}
