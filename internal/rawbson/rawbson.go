// Package rawbson reads the elements of a BSON document in place, reading each key once.
//
// bsoncore.ReadElement finds the end of an element's key, and Element.KeyBytes and
// Element.Value each find it again; on the hot path, where every change event's envelope is
// walked, those repeated scans cost more than the walk itself. ReadElement here returns the
// type, the key and the value bytes from one scan.
package rawbson

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Element is one element of a document; Key and Value are sub-slices of the document.
type Element struct {
	Type  bsoncore.Type
	Key   []byte
	Value []byte // the value's bytes, as in bsoncore.Value.Data
}

// Core returns the element's value as a bsoncore.Value.
func (e Element) Core() bsoncore.Value { return bsoncore.Value{Type: e.Type, Data: e.Value} }

// ReadElement reads the element at the start of src (the elements of a document follow its
// int32 length) and returns it with the bytes after it. ok is false when src does not start
// with a whole element: it is empty, it is the document's terminating NUL, or it is damaged.
func ReadElement(src []byte) (el Element, rest []byte, ok bool) {
	if len(src) < 2 {
		return Element{}, src, false
	}
	i := bytes.IndexByte(src[1:], 0)
	if i < 0 {
		return Element{}, src, false
	}
	t := bsoncore.Type(src[0])
	v, rest, ok := bsoncore.ReadValue(src[i+2:], t)
	if !ok {
		return Element{}, src, false
	}
	return Element{Type: t, Key: src[1 : i+1], Value: v.Data}, rest, true
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
// or the document is damaged before it.
func Lookup(doc []byte, key string) (Element, bool) {
	rem, ok := Elements(doc)
	if !ok {
		return Element{}, false
	}
	for len(rem) > 0 {
		el, next, ok := ReadElement(rem)
		if !ok {
			return Element{}, false
		}
		if string(el.Key) == key {
			return el, true
		}
		rem = next
	}
	return Element{}, false
}
