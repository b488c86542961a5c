package stream

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
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

// scanEnvelope walks the top-level elements of raw once, without allocating. A malformed
// document yields what was found before the damage; the dispatcher's decode reports the damage
// against the event.
func scanEnvelope(raw []byte) envelope {
	var env envelope
	_, rem, ok := bsoncore.ReadLength(raw)
	if !ok {
		return env
	}
	for len(rem) > 1 { // the trailing NUL
		el, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			break
		}
		rem = next
		switch string(el.KeyBytes()) { // no allocation: the compiler compares in place
		case "_id":
			if v, err := el.ValueErr(); err == nil && env.id == nil {
				env.id = v.Data
			}
		case "operationType":
			if v, err := el.ValueErr(); err == nil && v.Type == bsoncore.TypeString && len(v.Data) >= 5 && env.op == nil {
				env.op = v.Data[4 : len(v.Data)-1] // int32 length, bytes, NUL
			}
		case "splitEvent":
			if v, err := el.ValueErr(); err == nil && !env.hasSplit {
				env.split, env.hasSplit = bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}, true
			}
		}
	}
	return env
}

// copyChunk is the size of the memory blocks eventCopier copies small events into; an event
// larger than copyChunk/4 gets a block of its own.
const copyChunk = 64 << 10

// eventCopier copies events out of the driver's batch (its Current is valid only until the
// next TryNext) into shared blocks of copyChunk bytes: one allocation per block instead of one
// per event. The price is retention: memory is freed a block at a time, so a handler that keeps
// a document sharing the event's bytes (a bson.Raw) keeps at most copyChunk bytes alive, not
// only its event. It is owned by the reader goroutine.
type eventCopier struct{ block []byte }

// copy returns a copy of b whose capacity ends with it, so that an append to one event's bytes
// reallocates instead of writing over the next event's.
func (c *eventCopier) copy(b []byte) []byte {
	if len(b) > copyChunk/4 {
		return bytes.Clone(b)
	}
	if cap(c.block)-len(c.block) < len(b) {
		c.block = make([]byte, 0, copyChunk)
	}
	start := len(c.block)
	c.block = append(c.block, b...)
	return c.block[start:len(c.block):len(c.block)]
}
