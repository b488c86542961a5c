package query

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// splitPath splits a dotted path into its components.
func splitPath(path string) []string { return strings.Split(path, ".") }

// lookupField returns the value of the first field named key in d.
func lookupField(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// arrayIndex parses a path component as an array index: decimal digits
// only, no sign, no leading zeros (except "0"), as the server does.
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n, true
}

// GetPath returns the value at an exact dotted path: each component names a
// field of a document, or indexes an array when it is a non-negative
// integer. There is no fan-out through arrays. ok is false when any
// component is missing or cannot be applied.
func GetPath(doc bson.D, path string) (any, bool) {
	var cur any = doc
	for _, part := range splitPath(path) {
		switch c := cur.(type) {
		case bson.D:
			v, ok := lookupField(c, part)
			if !ok {
				return nil, false
			}
			cur = v
		case bson.A:
			i, ok := arrayIndex(part)
			if !ok || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// LookupAll returns the values a query path reaches in doc, fanning out
// through arrays the way the query language does: a component applied to an
// array is applied to every document element of the array, and a numeric
// component also selects that array element. Missing values are omitted.
// Arrays reached at the end of the path are returned whole; callers that
// need their elements (matching, multikey index keys) expand them.
func LookupAll(doc bson.D, path string) []any {
	var items []item
	walkDoc(doc, splitPath(path), false, false, &items)
	out := make([]any, 0, len(items))
	for _, it := range items {
		if !it.missing {
			out = append(out, it.v)
		}
	}
	return out
}

// item is one value produced by query path traversal. missing marks a path
// that ended at an absent field (or ran into a scalar), which matches null.
type item struct {
	v       any
	missing bool
}

// pathItems returns the items a query predicate is applied to. With
// expandLeaf, an array at the end of the path yields each of its elements
// and then the array itself.
func pathItems(doc bson.D, parts []string, expandLeaf bool) []item {
	var items []item
	walkDoc(doc, parts, expandLeaf, false, &items)
	return items
}

// walkDoc applies parts to document d. inArray is true when d is an element
// of an array being traversed; then a numeric component that d lacks yields
// nothing instead of a missing value (it was meant as an array index).
func walkDoc(d bson.D, parts []string, expandLeaf, inArray bool, out *[]item) {
	v, ok := lookupField(d, parts[0])
	if !ok {
		if inArray {
			if _, isIdx := arrayIndex(parts[0]); isIdx {
				return
			}
		}
		*out = append(*out, item{missing: true})
		return
	}
	walkValue(v, parts[1:], expandLeaf, out)
}

func walkValue(v any, rest []string, expandLeaf bool, out *[]item) {
	if len(rest) == 0 {
		if arr, ok := v.(bson.A); ok && expandLeaf {
			for _, e := range arr {
				*out = append(*out, item{v: e})
			}
		}
		*out = append(*out, item{v: v})
		return
	}
	switch c := v.(type) {
	case bson.D:
		walkDoc(c, rest, expandLeaf, false, out)
	case bson.A:
		walkArray(c, rest, expandLeaf, out)
	default:
		*out = append(*out, item{missing: true})
	}
}

func walkArray(arr bson.A, rest []string, expandLeaf bool, out *[]item) {
	idx, isIdx := arrayIndex(rest[0])
	for i, e := range arr {
		if d, ok := e.(bson.D); ok {
			walkDoc(d, rest, expandLeaf, true, out)
		}
		if isIdx && i == idx {
			if len(rest) == 1 {
				// The path ends at an array offset: the element itself,
				// without expanding it if it is an array.
				*out = append(*out, item{v: e})
			} else {
				walkValue(e, rest[1:], expandLeaf, out)
			}
		}
	}
}
