package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// returnKeyPattern returns the key pattern of the index a find with returnKey reads, whose keys
// it returns instead of the documents; scan is true for a collection scan, which returns empty
// documents. The index is the hinted one; without a hint it is the _id index for an _id
// equality, a collection scan when no index has a field of the filter or sort as its first key,
// and the one such index when there is one. With several candidates the choice is the query
// planner's, which mongosim does not have: that case is refused rather than guessed.
func (e *engine) returnKeyPattern(c *command, db, coll string, filter, sortSpec bson.D) (pattern bson.D, scan bool, err *cmdError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cl := e.viewLocked(c, db, coll)
	if cl == nil {
		return nil, true, nil
	}
	if h, ok := c.Arg("hint"); ok && !isEmptyHint(h) {
		switch x := h.(type) {
		case string:
			if ix := cl.indexByName(x); ix != nil {
				return ix.key, false, nil
			}
		case bson.D:
			if len(x) == 1 && x[0].Key == "$natural" {
				return nil, true, nil
			}
			for _, ix := range cl.indexes {
				if sameKey(ix.key, x) {
					return ix.key, false, nil
				}
			}
		}
		return nil, false, errorf(codeBadValue, "error processing query: ns=%s.%s: planner returned error :: caused by :: hint provided does not correspond to an existing index", db, coll)
	}
	if _, ok := idEquality(filter); ok && len(filter) == 1 {
		return bson.D{{Key: "_id", Value: int32(1)}}, false, nil
	}
	fields := map[string]bool{}
	var collect func(d bson.D)
	collect = func(d bson.D) {
		for _, f := range d {
			switch {
			case f.Key == "$and":
				// The conjuncts of $and constrain the index fields as top-level fields do.
				arr, _ := f.Value.(bson.A)
				for _, x := range arr {
					if sub, ok := x.(bson.D); ok {
						collect(sub)
					}
				}
			case !strings.HasPrefix(f.Key, "$"):
				fields[f.Key] = true
			}
		}
	}
	collect(filter)
	for _, f := range sortSpec {
		fields[f.Key] = true
	}
	var cand []*index
	for _, ix := range cl.indexes {
		if fields[ix.key[0].Key] && ix.partialExpr == nil && !ix.sparse {
			cand = append(cand, ix)
		}
	}
	switch len(cand) {
	case 0:
		return nil, true, nil
	case 1:
		return cand[0].key, false, nil
	}
	return nil, false, unsupported("find's returnKey without a hint when several indexes could serve the query (the choice is the query planner's)")
}

// returnKeyDoc is the index key of doc under pattern that the index scan meets first: each
// key field's value, null when absent. A multikey document (an array under a key field) has
// one key per element; the scan returns the document once, with the first of its keys within
// the bounds of the filter's conditions on the key fields, in the scan's direction (reverse:
// a backward scan, for a sort against the index's order).
func returnKeyDoc(doc, pattern, filter bson.D, reverse bool) (bson.D, *cmdError) {
	for _, k := range pattern {
		if _, hashed := k.Value.(string); hashed {
			// Its keys are the server's hashes of the values, which mongosim does not compute.
			return nil, unsupported("find's returnKey on a hashed index (%s)", k.Key)
		}
	}
	ix := &index{key: pattern}
	keys, err := ix.keysFor(doc)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return bson.D{}, nil
	}
	best := keys[0].vals
	if len(keys) > 1 {
		conds := make([]*query.Filter, len(pattern))
		for i, k := range pattern {
			if c, ok := lookupD(filter, k.Key); ok {
				f, qerr := query.CompileFilter(bson.D{{Key: k.Key, Value: c}})
				if qerr != nil {
					return nil, qerrToCmd(qerr)
				}
				conds[i] = f
			}
		}
		var inBounds [][]any
		for _, k := range keys {
			ok := true
			for i, f := range conds {
				if f == nil {
					continue
				}
				m, merr := f.Match(nestedField(pattern[i].Key, k.vals[i]), nil)
				if merr != nil || !m {
					ok = false
					break
				}
			}
			if ok {
				inBounds = append(inBounds, k.vals)
			}
		}
		if len(inBounds) == 0 {
			for _, k := range keys {
				inBounds = append(inBounds, k.vals)
			}
		}
		best = inBounds[0]
		for _, v := range inBounds[1:] {
			if c := compareIndexKeys(v, best, pattern); (c < 0) != reverse && c != 0 {
				best = v
			}
		}
	}
	out := make(bson.D, len(pattern))
	for i, k := range pattern {
		out[i] = bson.E{Key: k.Key, Value: best[i]}
	}
	return out, nil
}

// compareIndexKeys orders two keys of an index with key pattern pattern (a descending field
// reverses its order).
func compareIndexKeys(a, b []any, pattern bson.D) int {
	for i, k := range pattern {
		c := query.Compare(a[i], b[i])
		if n, ok := asInt64(k.Value); ok && n < 0 {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// nestedField returns a document with v at the dotted path.
func nestedField(path string, v any) bson.D {
	parts := strings.Split(path, ".")
	d := bson.D{{Key: parts[len(parts)-1], Value: v}}
	for i := len(parts) - 2; i >= 0; i-- {
		d = bson.D{{Key: parts[i], Value: d}}
	}
	return d
}

// returnKeyReverse reports whether a find sorted by sortSpec reads the index with key pattern
// backwards: its first sort field is the index's first field in the opposite direction.
func returnKeyReverse(pattern, sortSpec bson.D) bool {
	if len(pattern) == 0 || len(sortSpec) == 0 || sortSpec[0].Key != pattern[0].Key {
		return false
	}
	ps, _ := asInt64(pattern[0].Value)
	ss, _ := asInt64(sortSpec[0].Value)
	return (ps < 0) != (ss < 0)
}
