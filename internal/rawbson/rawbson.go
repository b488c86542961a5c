// Package rawbson reads the elements of a BSON document in place, reading each key once.
//
// bsoncore.ReadElement finds the end of an element's key, and Element.KeyBytes and
// Element.Value each find it again; on the hot path, where every change event's envelope is
// walked, those repeated scans cost more than the walk itself. ElementAt here returns the
// type, the key and the value offsets from one scan.
package rawbson

import (
	"bytes"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Element is one element of a document; Key and Value are sub-slices of the document.
type Element struct {
	Type  bsoncore.Type
	Key   []byte
	Value []byte // the value's bytes, as in bsoncore.Value.Data
}

// ElementAt reads the element starting at elems[i] (elems as Elements returns them): its type,
// its key elems[i+1:k] and its value elems[k+1:end]; the next element starts at end. ok is
// false when no whole element starts there. Offsets, not slices, so that a walk builds only
// the slices it uses: on the hot path, returning an Element and the rest of the document for
// every field of every event cost as much as reading them.
func ElementAt(elems []byte, i int) (t bsoncore.Type, k, end int, ok bool) {
	if len(elems)-i < 2 {
		return 0, 0, 0, false
	}
	// Keys are short: a plain loop beats bytes.IndexByte's setup.
	k = i + 1
	for k < len(elems) && elems[k] != 0 {
		k++
	}
	if k >= len(elems) {
		return 0, 0, 0, false
	}
	t = bsoncore.Type(elems[i])
	n := valueLength(elems[k+1:], t)
	if n < 0 {
		return 0, 0, 0, false
	}
	return t, k, k + 1 + n, true
}

// valueLength returns the length of the value of type t at the start of v, or -1 when v does
// not hold one whole value of that type (or t is not a BSON type). It checks lengths against
// len(v), not the value's contents (a string's NUL, a document's elements): the value's reader
// does that.
func valueLength(v []byte, t bsoncore.Type) int {
	var n int
	switch t {
	case bsoncore.TypeDouble, bsoncore.TypeDateTime, bsoncore.TypeTimestamp, bsoncore.TypeInt64:
		n = 8
	case bsoncore.TypeInt32:
		n = 4
	case bsoncore.TypeBoolean:
		n = 1
	case bsoncore.TypeObjectID:
		n = 12
	case bsoncore.TypeDecimal128:
		n = 16
	case bsoncore.TypeNull, bsoncore.TypeUndefined, bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
		n = 0
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray, bsoncore.TypeCodeWithScope:
		l, ok := int32At(v)
		if !ok || l < 5 {
			return -1
		}
		n = l
	case bsoncore.TypeString, bsoncore.TypeJavaScript, bsoncore.TypeSymbol:
		l, ok := int32At(v)
		if !ok || l < 1 {
			return -1
		}
		n = 4 + l
	case bsoncore.TypeBinary:
		l, ok := int32At(v)
		if !ok || l < 0 {
			return -1
		}
		n = 5 + l
	case bsoncore.TypeDBPointer:
		l, ok := int32At(v)
		if !ok || l < 1 {
			return -1
		}
		n = 4 + l + 12
	case bsoncore.TypeRegex: // two C strings: the pattern and the options
		p := bytes.IndexByte(v, 0)
		if p < 0 {
			return -1
		}
		o := bytes.IndexByte(v[p+1:], 0)
		if o < 0 {
			return -1
		}
		n = p + 1 + o + 1
	default:
		return -1
	}
	if n < 0 || n > len(v) { // n < 0: a length near MaxInt32 wrapped a 32-bit int
		return -1
	}
	return n
}

// int32At reads the little-endian int32 at the start of v.
func int32At(v []byte) (int, bool) {
	if len(v) < 4 {
		return 0, false
	}
	return int(int32(binary.LittleEndian.Uint32(v))), true
}

// Elements returns the bytes of doc's elements (without its length and terminating NUL), and
// whether doc's length prefix matches len(doc).
func Elements(doc []byte) ([]byte, bool) {
	n, rem, ok := bsoncore.ReadLength(doc)
	if !ok || int(n) != len(doc) || n < 5 || doc[len(doc)-1] != 0 {
		return nil, false
	}
	return rem[:len(rem)-1], true
}

// Lookup returns the first top-level element of doc named key. ok is false when there is none
// or the document is damaged before it. It walks offsets without building an Element per
// element it passes (the dispatcher looks up documentKey, after the full document, in every
// event).
func Lookup(doc []byte, key string) (Element, bool) {
	rem, ok := Elements(doc)
	if !ok {
		return Element{}, false
	}
	for i := 0; i < len(rem); {
		t, k, end, ok := ElementAt(rem, i)
		if !ok {
			return Element{}, false
		}
		if string(rem[i+1:k]) == key {
			return Element{Type: t, Key: rem[i+1 : k : k], Value: rem[k+1 : end : end]}, true
		}
		i = end
	}
	return Element{}, false
}
