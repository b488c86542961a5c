package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
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
	for _, f := range filter {
		if !strings.HasPrefix(f.Key, "$") {
			fields[f.Key] = true
		}
	}
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

// returnKeyDoc is the index key of doc under pattern: each key field's value, null when absent.
// An array value (a multikey index) is refused: the key returned would be the one the scan
// matched, which only a real index scan knows.
func returnKeyDoc(doc, pattern bson.D) (bson.D, *cmdError) {
	out := make(bson.D, 0, len(pattern))
	for _, k := range pattern {
		var v any
		cur := any(doc)
		for _, part := range strings.Split(k.Key, ".") {
			d, ok := cur.(bson.D)
			if !ok {
				cur = nil
				break
			}
			cur, _ = lookupD(d, part)
		}
		v = cur
		if _, isArr := v.(bson.A); isArr {
			return nil, unsupported("find's returnKey on a multikey index (%s holds an array)", k.Key)
		}
		out = append(out, bson.E{Key: k.Key, Value: v})
	}
	return out, nil
}
