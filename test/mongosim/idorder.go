package mongosim

import (
	"math"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// idEntry is one key of the ordered _id index: a document's _id value and its hash key (the
// key of collection.byID).
type idEntry struct {
	id  any
	key string
}

// idOrder is the ordered part of the _id_ index: every live document's _id, sorted in BSON
// order (query.Compare), as a server's _id index is. byID answers point lookups; idOrder
// answers _id range scans and _id-sorted reads without scanning and sorting the collection.
// An insert or a delete costs a binary search and, unless the _id is the largest (the common
// case of ObjectIDs and counters), a move of the entries after it. Guarded by engine.mu with
// the rest of the collection.
type idOrder []idEntry

// search returns the position of the first entry whose _id is >= id (inclusive) or > id.
func (o idOrder) search(id any, inclusive bool) int {
	return sort.Search(len(o), func(i int) bool {
		c := query.Compare(o[i].id, id)
		if inclusive {
			return c >= 0
		}
		return c > 0
	})
}

// insert adds the entry of a new _id (not present: byID was checked).
func (o *idOrder) insert(id any, key string) {
	s := *o
	if n := len(s); n == 0 || query.Compare(s[n-1].id, id) < 0 {
		*o = append(s, idEntry{id: id, key: key})
		return
	}
	i := s.search(id, true)
	s = append(s, idEntry{})
	copy(s[i+1:], s[i:])
	s[i] = idEntry{id: id, key: key}
	*o = s
}

// remove drops the entry with hash key key, whose _id is id.
func (o *idOrder) remove(id any, key string) {
	s := *o
	for i := s.search(id, true); i < len(s) && query.Compare(s[i].id, id) == 0; i++ {
		if s[i].key == key {
			copy(s[i:], s[i+1:])
			s[len(s)-1] = idEntry{}
			*o = s[:len(s)-1]
			return
		}
	}
}

// idBound is one end of an _id range: the value and whether it is included.
type idBound struct {
	v         any
	inclusive bool
}

// idRange is the _id range a filter confines its matches to. exact is true when the filter is
// nothing but that range, so every document in it matches.
type idRange struct {
	lo, hi *idBound
	exact  bool
}

// idRangeOf returns the range of _id values outside which no document can match filter: the
// top-level (and $and-nested) $gt, $gte, $lt, $lte and $eq conditions on _id. A comparison only
// matches values of its own BSON type bracket, which sit together in BSON order, so the range
// in BSON order holds every match (it may hold non-matches: the filter is still applied).
// Bounds whose comparison semantics are not a plain BSON-order comparison (null, MinKey,
// MaxKey, arrays, documents, regexes, NaN) are not used.
func idRangeOf(filter bson.D) idRange {
	r := idRange{exact: true}
	r.add(filter)
	return r
}

func (r *idRange) add(filter bson.D) {
	for _, e := range filter {
		switch e.Key {
		case "$and":
			arr, ok := e.Value.(bson.A)
			if !ok {
				r.exact = false
				continue
			}
			for _, c := range arr {
				if d, ok := c.(bson.D); ok {
					r.add(d)
				} else {
					r.exact = false
				}
			}
		case "_id":
			ops, ok := e.Value.(bson.D)
			if !ok || len(ops) == 0 || !strings.HasPrefix(ops[0].Key, "$") {
				if rangeValue(e.Value) {
					r.tighten(&idBound{v: e.Value, inclusive: true}, true)
					r.tighten(&idBound{v: e.Value, inclusive: true}, false)
				} else {
					r.exact = false
				}
				continue
			}
			for _, op := range ops {
				if !rangeValue(op.Value) {
					r.exact = false
					continue
				}
				b := &idBound{v: op.Value}
				switch op.Key {
				case "$gt":
					r.tighten(b, true)
				case "$gte":
					b.inclusive = true
					r.tighten(b, true)
				case "$lt":
					r.tighten(b, false)
				case "$lte":
					b.inclusive = true
					r.tighten(b, false)
				case "$eq":
					b.inclusive = true
					r.tighten(b, true)
					r.tighten(&idBound{v: op.Value, inclusive: true}, false)
				default:
					r.exact = false
				}
			}
		default:
			r.exact = false
		}
	}
}

// tighten replaces the lower (lower true) or upper bound by b when b is narrower. Two bounds of
// different type brackets leave no match at all, so keeping either one is correct; the range
// is then only not exact.
func (r *idRange) tighten(b *idBound, lower bool) {
	cur := &r.hi
	if lower {
		cur = &r.lo
	}
	if *cur == nil {
		*cur = b
		return
	}
	if query.TypeOrder((*cur).v) != query.TypeOrder(b.v) {
		r.exact = false
	}
	c := query.Compare(b.v, (*cur).v)
	if !lower {
		c = -c
	}
	if c > 0 || (c == 0 && !b.inclusive) {
		*cur = b
	}
}

// rangeValue reports whether v compares with _id values by plain BSON order in $gt and the
// like, and equals them only when Compare says so.
func rangeValue(v any) bool {
	switch t := v.(type) {
	case int32, int64, string, bson.ObjectID, bson.DateTime, bson.Timestamp, bool, bson.Binary:
		return true
	case float64:
		return !math.IsNaN(t)
	}
	return false
}

// idSortDir returns 1 or -1 when spec is exactly {_id: 1} or {_id: -1}.
func idSortDir(spec bson.D) (int, bool) {
	if len(spec) != 1 || spec[0].Key != "_id" {
		return 0, false
	}
	n, ok := asInt64(spec[0].Value)
	if f, isF := spec[0].Value.(float64); isF {
		n, ok = int64(f), f == 1 || f == -1
	}
	if !ok || (n != 1 && n != -1) {
		return 0, false
	}
	return int(n), true
}

// idRangeDocs returns the documents of coll whose _id lies in r, in _id order (dir 1) or
// reverse _id order (dir -1), at most max of them when max > 0 (the first ones in that order).
// A range with one bound is confined to that bound's type bracket, the only one its comparison
// matches; bounds of two brackets match nothing.
func (coll *collection) idRangeDocs(r idRange, dir int, max int) []bson.D {
	o := coll.order
	from, to := 0, len(o)
	bracketAt := func(b int, after bool) int {
		return sort.Search(len(o), func(i int) bool {
			t := query.TypeOrder(o[i].id)
			if after {
				return t > b
			}
			return t >= b
		})
	}
	switch {
	case r.lo != nil && r.hi != nil && query.TypeOrder(r.lo.v) != query.TypeOrder(r.hi.v):
		return nil
	case r.lo != nil:
		from = o.search(r.lo.v, r.lo.inclusive)
		if r.hi == nil {
			to = bracketAt(query.TypeOrder(r.lo.v), true)
		}
	case r.hi != nil:
		from = bracketAt(query.TypeOrder(r.hi.v), false)
	}
	if r.hi != nil {
		to = o.search(r.hi.v, !r.hi.inclusive)
	}
	if to <= from {
		return nil
	}
	n := to - from
	if max > 0 && max < n {
		n = max
	}
	out := make([]bson.D, 0, n)
	if dir >= 0 {
		for i := from; i < to && len(out) < n; i++ {
			out = append(out, coll.docs[coll.byID[o[i].key]].doc)
		}
		return out
	}
	for i := to - 1; i >= from && len(out) < n; i-- {
		out = append(out, coll.docs[coll.byID[o[i].key]].doc)
	}
	return out
}
