package mongosim

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// writeHint is the parsed hint of an update, delete or findAndModify: an index name, an index
// key pattern, or {$natural: ±1}. The zero value (no hint) changes nothing.
type writeHint struct {
	name    string // an index name
	pattern bson.D // an index key pattern
	natural int    // 1 or -1 for {$natural: ±1}
}

func (h writeHint) isSet() bool { return h.name != "" || h.pattern != nil || h.natural != 0 }

// parseWriteHint reads a statement's hint field. An empty string or document is no hint, as
// on a server; another type fails as the server's index-hint parser does.
func parseWriteHint(v any) (writeHint, *cmdError) {
	switch x := v.(type) {
	case nil:
		return writeHint{}, nil
	case string:
		return writeHint{name: x}, nil
	case bson.D:
		if len(x) == 0 {
			return writeHint{}, nil
		}
		if len(x) == 1 && x[0].Key == "$natural" {
			n, ok := asInt64(x[0].Value)
			if !ok || n == 0 {
				return writeHint{}, errorf(codeBadValue, "$natural hint may only accept 1 or -1, not %v", x[0].Value)
			}
			if n > 0 {
				return writeHint{natural: 1}, nil
			}
			return writeHint{natural: -1}, nil
		}
		return writeHint{pattern: x}, nil
	}
	return writeHint{}, errorf(codeFailedToParse, "Hint must be a string or an object")
}

// errBadHint is the server's refusal of a hint naming no index of the collection.
func errBadHint() *cmdError {
	return errorf(codeBadValue, "hint provided does not correspond to an existing index")
}

// resolve returns the index h names in coll (nil for a $natural hint or no hint), or the
// server's BadValue error when there is none.
func (h writeHint) resolve(coll *collection) (*index, *cmdError) {
	switch {
	case h.name != "":
		if ix := coll.indexByName(h.name); ix != nil {
			return ix, nil
		}
		return nil, errBadHint()
	case h.pattern != nil:
		for _, ix := range coll.indexes {
			if sameKey(ix.key, h.pattern) {
				return ix, nil
			}
		}
		return nil, errBadHint()
	}
	return nil, nil
}

// apply narrows and orders the matching slots of coll as the hinted plan reads them: a sparse
// or partial index holds only some documents, so only those can be found through it, and a
// write of one document takes the first in the index's (or the reverse natural) order. The
// slots come in natural order; the result is a new slice when it differs.
func (h writeHint) apply(coll *collection, slots []*docSlot) ([]*docSlot, *cmdError) {
	if !h.isSet() || coll == nil {
		return slots, nil
	}
	ix, err := h.resolve(coll)
	if err != nil {
		return nil, err
	}
	if ix == nil {
		if h.natural < 0 {
			slots = slices.Clone(slots)
			slices.Reverse(slots)
		}
		return slots, nil
	}
	if ix.sparse || ix.partial != nil {
		kept := make([]*docSlot, 0, len(slots))
		for _, s := range slots {
			keys, err := ix.keysFor(s.doc)
			if err != nil {
				return nil, err
			}
			if keys != nil {
				kept = append(kept, s)
			}
		}
		slots = kept
	}
	if len(slots) < 2 {
		return slots, nil
	}
	// Index order: by the key pattern, ties in natural order (the record id).
	docs := make([]bson.D, len(slots))
	bySlot := make(map[string]*docSlot, len(slots))
	for i, s := range slots {
		docs[i] = s.doc
		bySlot[s.key] = s
	}
	if err := query.SortDocsCollated(docs, ix.key, ix.collation.keyFunc()); err != nil {
		return nil, qerrToCmd(err)
	}
	out := make([]*docSlot, len(docs))
	for i, d := range docs {
		out[i] = bySlot[query.HashKey(docID(d))]
	}
	return out, nil
}

// statementHint reads the hint of a write statement ({q, u, hint, ...} or {q, limit, hint}).
func statementHint(st bson.D) (writeHint, *cmdError) {
	v, ok := lookupD(st, "hint")
	if !ok {
		return writeHint{}, nil
	}
	return parseWriteHint(v)
}
