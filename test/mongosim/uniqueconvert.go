package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// codeCannotConvertIndexToUnique is collMod's answer to {index: {unique: true}} when documents
// share a key of the index.
const codeCannotConvertIndexToUnique = 359

func init() {
	codeNames[codeCannotConvertIndexToUnique] = "CannotConvertIndexToUnique"
}

// errCannotConvertToUnique is that error with the server's violations field: one {ids: [...]}
// per group of documents sharing a key, which clients read to resolve the duplicates.
func errCannotConvertToUnique(coll *collection, ix *index) *cmdError {
	return &cmdError{Code: codeCannotConvertIndexToUnique,
		Msg:   "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.",
		Extra: bson.D{{Key: "violations", Value: coll.uniqueViolations(ix)}}}
}

// uniqueViolations groups the _ids of the documents sharing a key of ix, groups and ids in
// natural order; keys held by one document only are left out.
func (coll *collection) uniqueViolations(ix *index) bson.A {
	groups := make(map[string]bson.A)
	var order []string
	coll.scanSlots(func(s *docSlot) bool {
		keys, _ := ix.keysFor(s.doc)
		for _, k := range keys {
			if _, ok := groups[k.hash]; !ok {
				order = append(order, k.hash)
			}
			groups[k.hash] = append(groups[k.hash], docID(s.doc))
		}
		return true
	})
	out := bson.A{}
	for _, h := range order {
		if ids := groups[h]; len(ids) > 1 {
			out = append(out, bson.D{{Key: "ids", Value: ids}})
		}
	}
	return out
}
