package mongosim

import (
	"crypto/rand"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// collection is one collection of the catalog, or a transaction's private view of one.
//
// Documents are stored copy-on-write: a stored bson.D is never modified, every write stores a
// new one in a new docSlot, so readers holding an old document (or a transaction's view holding
// an old slot) stay consistent. docs keeps insertion (natural) order with nil holes for
// deleted documents; the holes are compacted away once they outnumber the live documents, so
// a scan costs O(live documents), not O(documents ever inserted).
//
// All fields are guarded by engine.mu.
type collection struct {
	db, name         string
	uuid             bson.Binary // UUID, binary subtype 4; kept across renames
	options          bson.D      // the create options, as listCollections reports them
	preAndPostImages bool        // changeStreamPreAndPostImages.enabled
	collation        *collation  // the default collation; nil = simple (collation.go)
	kind             *collKind   // capped, clustered, time-series, validated; nil = plain (collkind.go)

	docs  []*docSlot     // natural order; nil = deleted
	byID  map[string]int // query.HashKey(_id) -> position in docs
	order idOrder        // the _id values in BSON order (range scans, _id sorts)
	holes int            // nil entries in docs
	size  int64          // total encoded size of the live documents, in bytes

	indexes []*index // indexes[0] is always _id_
}

// docSlot is one stored document. Slots are immutable once stored: a write replaces the slot,
// so a slot pointer identifies one version of one document (used for write-conflict checks).
type docSlot struct {
	doc  bson.D
	key  string // query.HashKey of _id
	size int    // encoded size in bytes
}

// newUUID returns a random version-4 UUID as BSON binary subtype 4.
func newUUID() bson.Binary {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: 4, Data: b}
}

// newCollection returns an empty collection with its _id_ index.
func newCollection(db, name string) *collection {
	return &collection{
		db:      db,
		name:    name,
		uuid:    newUUID(),
		options: bson.D{},
		byID:    make(map[string]int),
		indexes: []*index{newIDIndex()},
	}
}

// ns returns "db.coll".
func (coll *collection) ns() string { return coll.db + "." + coll.name }

// clone returns a copy that shares the (immutable) slots but not the containers: a
// transaction writes to the copy without touching coll. Costs O(documents).
func (coll *collection) clone() *collection {
	cp := *coll
	cp.docs = make([]*docSlot, 0, len(coll.docs)-coll.holes)
	cp.byID = make(map[string]int, len(coll.byID))
	for _, s := range coll.docs {
		if s != nil {
			cp.byID[s.key] = len(cp.docs)
			cp.docs = append(cp.docs, s)
		}
	}
	cp.holes = 0
	cp.order = append(idOrder(nil), coll.order...)
	cp.indexes = make([]*index, len(coll.indexes))
	for i, ix := range coll.indexes {
		cp.indexes[i] = ix.clone()
	}
	return &cp
}

// count returns the number of live documents.
func (coll *collection) count() int { return len(coll.byID) }

// scan calls fn for each document in natural (insertion) order until fn returns false.
// fn must not modify the collection nor the documents.
func (coll *collection) scan(fn func(doc bson.D) bool) {
	if coll.kind != nil && coll.kind.clustered {
		coll.scanSlots(func(s *docSlot) bool { return fn(s.doc) })
		return
	}
	for _, s := range coll.docs {
		if s != nil && !fn(s.doc) {
			return
		}
	}
}

// scanSlots is scan over the slots (for writers, which need the keys).
func (coll *collection) scanSlots(fn func(s *docSlot) bool) {
	if coll.kind != nil && coll.kind.clustered {
		// A clustered collection's natural order is its _id order.
		for _, e := range coll.order {
			if !fn(coll.docs[coll.byID[e.key]]) {
				return
			}
		}
		return
	}
	for _, s := range coll.docs {
		if s != nil && !fn(s) {
			return
		}
	}
}

// findByID returns the document whose _id equals id (query equality: 1 == 1.0).
func (coll *collection) findByID(id any) (bson.D, bool) {
	s := coll.slot(query.HashKey(id))
	if s == nil {
		return nil, false
	}
	return s.doc, true
}

// slot returns the slot of the document with the given _id hash key, or nil.
func (coll *collection) slot(key string) *docSlot {
	i, ok := coll.byID[key]
	if !ok {
		return nil
	}
	return coll.docs[i]
}

// docID returns a stored document's _id (stored documents always have _id first).
func docID(doc bson.D) any {
	if len(doc) > 0 && doc[0].Key == "_id" {
		return doc[0].Value
	}
	v, _ := lookupD(doc, "_id")
	return v
}

// insertSlot stores a new document after checking the _id and unique indexes. On error
// nothing changes.
func (coll *collection) insertSlot(s *docSlot) *cmdError {
	if _, dup := coll.byID[s.key]; dup {
		return coll.dupKeyError(coll.indexes[0], []any{docID(s.doc)})
	}
	keys, err := coll.uniqueKeys(s.doc, s.key)
	if err != nil {
		return err
	}
	if err := coll.checkPrepareUnique(s.doc, s.key, nil); err != nil {
		return err
	}
	coll.addKeys(keys, s.key)
	coll.order.insert(docID(s.doc), s.key)
	coll.byID[s.key] = len(coll.docs)
	coll.docs = append(coll.docs, s)
	coll.size += int64(s.size)
	return nil
}

// replaceSlot replaces the document with key s.key (which must exist) by s, keeping its
// natural position, after checking unique indexes. On error nothing changes.
func (coll *collection) replaceSlot(s *docSlot) *cmdError {
	i, ok := coll.byID[s.key]
	if !ok {
		return errorf(codeInternalError, "mongosim: replace of a missing document")
	}
	old := coll.docs[i]
	if err := coll.checkPrepareUnique(s.doc, s.key, old.doc); err != nil {
		return err
	}
	oldKeys, _ := coll.indexKeysOf(old.doc)
	coll.removeKeys(oldKeys, old.key)
	keys, err := coll.uniqueKeys(s.doc, s.key)
	if err != nil {
		coll.addKeys(oldKeys, old.key)
		return err
	}
	coll.addKeys(keys, s.key)
	coll.docs[i] = s
	coll.size += int64(s.size - old.size)
	return nil
}

// removeSlot deletes the document with the given key, if present, and returns its slot.
func (coll *collection) removeSlot(key string) *docSlot {
	i, ok := coll.byID[key]
	if !ok {
		return nil
	}
	old := coll.docs[i]
	keys, _ := coll.indexKeysOf(old.doc)
	coll.removeKeys(keys, key)
	coll.order.remove(docID(old.doc), key)
	delete(coll.byID, key)
	coll.docs[i] = nil
	coll.holes++
	coll.size -= int64(old.size)
	coll.compact()
	return old
}

// compact drops the holes left by deletes once they outnumber the live documents (and are
// more than a few), so natural-order scans stay proportional to the live documents.
// Amortised O(1) per delete.
func (coll *collection) compact() {
	if coll.holes < 32 || coll.holes <= len(coll.byID) {
		return
	}
	live := make([]*docSlot, 0, len(coll.byID))
	for _, s := range coll.docs {
		if s != nil {
			coll.byID[s.key] = len(live)
			live = append(live, s)
		}
	}
	clear(coll.docs) // let the old backing array's slots be collected
	coll.docs, coll.holes = live, 0
}

// indexByName returns the index named name, or nil.
func (coll *collection) indexByName(name string) *index {
	for _, ix := range coll.indexes {
		if ix.name == name {
			return ix
		}
	}
	return nil
}

// uniqueKeys computes the keys doc has in each unique index (other than _id_) and checks that
// no other document holds them. The result is aligned with coll.indexes.
func (coll *collection) uniqueKeys(doc bson.D, idKey string) ([][]indexKey, *cmdError) {
	if len(coll.indexes) == 1 {
		return nil, nil // only _id_, whose keys are byID
	}
	out := make([][]indexKey, len(coll.indexes))
	for i, ix := range coll.indexes {
		if ix.isID || !ix.unique {
			continue
		}
		keys, err := ix.keysFor(doc)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if holder, ok := ix.entries[k.hash]; ok && holder != idKey {
				return nil, coll.dupKeyError(ix, k.vals)
			}
		}
		out[i] = keys
	}
	return out, nil
}

// indexKeysOf computes the keys of a stored document in each unique index, without
// checking for duplicates.
func (coll *collection) indexKeysOf(doc bson.D) ([][]indexKey, *cmdError) {
	if len(coll.indexes) == 1 {
		return nil, nil
	}
	out := make([][]indexKey, len(coll.indexes))
	for i, ix := range coll.indexes {
		if ix.isID || !ix.unique {
			continue
		}
		keys, err := ix.keysFor(doc)
		if err != nil {
			return nil, err
		}
		out[i] = keys
	}
	return out, nil
}

func (coll *collection) addKeys(keys [][]indexKey, idKey string) {
	for i, ks := range keys {
		if len(ks) > 0 {
			coll.indexes[i].own()
		}
		for _, k := range ks {
			coll.indexes[i].entries[k.hash] = idKey
		}
	}
}

func (coll *collection) removeKeys(keys [][]indexKey, idKey string) {
	for i, ks := range keys {
		if i >= len(coll.indexes) {
			break
		}
		ix := coll.indexes[i]
		if len(ks) > 0 {
			ix.own()
		}
		for _, k := range ks {
			if ix.entries[k.hash] == idKey {
				delete(ix.entries, k.hash)
			}
		}
	}
}

// dupKeyError builds the server's DuplicateKey error for a key of ix.
func (coll *collection) dupKeyError(ix *index, vals []any) *cmdError {
	kv := make(bson.D, len(ix.key))
	for i, f := range ix.key {
		var v any
		if i < len(vals) {
			v = vals[i]
		}
		kv[i] = bson.E{Key: f.Key, Value: v}
	}
	return &cmdError{
		Code: codeDuplicateKey,
		Msg: "E11000 duplicate key error collection: " + coll.ns() + " index: " + ix.name +
			" dup key: " + formatKeyValue(kv),
		Extra: bson.D{{Key: "keyPattern", Value: slices.Clone(ix.key)}, {Key: "keyValue", Value: kv}},
	}
}

// lookupCurrentLocked returns the current committed version of the document with the given
// document key ({_id: …}) in db.coll, for change-stream updateLookup. Caller holds e.mu.
func (e *engine) lookupCurrentLocked(db, coll string, docKey bson.D) (bson.D, bool) {
	c := e.collLocked(db, coll)
	if c == nil {
		return nil, false
	}
	id, ok := lookupD(docKey, "_id")
	if !ok {
		return nil, false
	}
	return c.findByID(id)
}

// checkPrepareUnique refuses a write that would add, to an index with prepareUnique, a key
// another document already has (DuplicateKey), as a server does while an index is being
// prepared for conversion to unique; duplicates that already existed stay. old is the
// document's previous version (nil for an insert): keys it already had are not new. Such
// indexes keep no key entries, so the check scans the collection.
func (coll *collection) checkPrepareUnique(doc bson.D, idKey string, old bson.D) *cmdError {
	for _, ix := range coll.indexes {
		if !ix.prepareUnique || ix.unique {
			continue
		}
		keys, err := ix.keysFor(doc)
		if err != nil {
			return err
		}
		had := map[string]bool{}
		if old != nil {
			oldKeys, _ := ix.keysFor(old)
			for _, k := range oldKeys {
				had[k.hash] = true
			}
		}
		for _, k := range keys {
			if had[k.hash] {
				continue
			}
			var dup *cmdError
			coll.scanSlots(func(other *docSlot) bool {
				if other.key == idKey {
					return true
				}
				oks, _ := ix.keysFor(other.doc)
				for _, ok := range oks {
					if ok.hash == k.hash {
						dup = coll.dupKeyError(ix, k.vals)
						return false
					}
				}
				return true
			})
			if dup != nil {
				return dup
			}
		}
	}
	return nil
}
