package query

import (
	"sort"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Change descriptions (updateDescription of change-stream update events).
//
// Updates are described the way a server records them in a $v:2 delta
// oplog entry, which change streams then turn into updatedFields,
// removedFields and truncatedArrays. The delta is a tree: per document,
// updated fields, inserted fields, deleted fields and sub-diffs of
// sub-documents/arrays; per array, a new length when it shrank and updated
// elements or sub-diffs by index. The event lists, per level, updated then
// inserted fields (updatedFields), deleted fields (removedFields), then
// the sub-diffs depth-first; arrays report their truncation first, then
// their elements in index order.
//
// Modifier updates log the paths the modifiers touched:
//   - a field set is reported at its own dotted path with its new value
//     ($set {"a.b": 1} gives "a.b"; a $set of a whole sub-document gives
//     that field with the whole new value);
//   - when intermediate documents had to be created, the top-most created
//     field is reported with its whole value ($set {"x.y.z": 1} on {}
//     gives "x": {y: {z: 1}});
//   - array elements are reported in dot notation ("arr.1"); setting past
//     the end pads with nulls, and only the set element is reported;
//   - $push that only appends to a non-empty array (no $sort, no
//     $position inside the array, no trimming $slice) reports each new
//     element as "arr.N"; every other array change ($push to an empty
//     array or with $sort/$position/$slice, $addToSet, $pull, $pullAll,
//     $pop) reports the whole array "arr";
//   - $[] and $[<id>] matching several elements report the array whole
//     when more than one element changed, or the one changed element whole
//     ("arr.1": {...}); matching a single element, it reports the precise
//     path ("arr.1.k");
//   - $unset (and the source of $rename) go to removedFields; $unset of an
//     array element sets it to null and reports "arr.N": null;
//   - modifications that leave a value binary-identical are not reported,
//     and an update with nothing reported is a no-op (Changed false).
// truncatedArrays is always empty for modifier updates.
//
// Pipeline updates compute the delta between the old and the new document
// with the server's algorithm (computeDocDiff below), including its size
// rule: a sub-document or array whose delta would not be smaller than its
// new value is reported whole, and when the delta of the whole document
// would not be smaller than the new document (plus 15 bytes of oplog
// metadata) the update is logged as a replacement (UpdateResult.Replacement,
// a "replace" change event), as a real server does.

// diffLeaf is an updated or inserted field of a document delta.
type diffLeaf struct {
	name  string
	value any
}

// diffSub is a sub-diff of a document delta.
type diffSub struct {
	name string
	doc  *docDelta
	arr  *arrDelta
}

// docDelta is the delta of a document. size approximates its BSON size the
// way the server does.
type docDelta struct {
	updates []diffLeaf
	inserts []diffLeaf
	deletes []string
	subs    []diffSub
	size    int
}

// arrEntry is an updated element (sub nil) or a sub-diff of an array.
type arrEntry struct {
	value any
	doc   *docDelta
	arr   *arrDelta
}

// arrDelta is the delta of an array.
type arrDelta struct {
	resize  int // new length when the array shrank, else -1
	entries map[int]arrEntry
	size    int
}

const (
	emptyDocDeltaSize = 5 // an empty BSON document
	emptyArrDeltaSize = 9 // empty document + {a: true}
	sectionWrapSize   = 8 // type byte, one-letter name, NUL, empty document
	oplogDeltaPadding = 15
)

func newDocDelta(padding int) *docDelta { return &docDelta{size: emptyDocDeltaSize + padding} }

func newArrDelta() *arrDelta {
	return &arrDelta{resize: -1, entries: map[int]arrEntry{}, size: emptyArrDeltaSize}
}

// bsonValueSize is the size of v's value in BSON encoding.
func bsonValueSize(v any) int {
	b, err := bson.Marshal(bson.D{{Key: "", Value: v}})
	if err != nil {
		return 0
	}
	return len(b) - 7 // length(4) + type(1) + empty name NUL(1) + document NUL(1)
}

func (d *docDelta) addUpdate(name string, v any) {
	if len(d.updates) == 0 {
		d.size += sectionWrapSize
	}
	d.size += len(name) + 2 + bsonValueSize(v)
	d.updates = append(d.updates, diffLeaf{name, v})
}

func (d *docDelta) addInsert(name string, v any) {
	if len(d.inserts) == 0 {
		d.size += sectionWrapSize
	}
	d.size += len(name) + 2 + bsonValueSize(v)
	d.inserts = append(d.inserts, diffLeaf{name, v})
}

func (d *docDelta) addDelete(name string) {
	if len(d.deletes) == 0 {
		d.size += sectionWrapSize
	}
	d.size += len(name) + 2 + 1
	d.deletes = append(d.deletes, name)
}

func (d *docDelta) addSub(name string, sd *docDelta, sa *arrDelta) {
	n := 0
	if sd != nil {
		n = sd.size
	} else {
		n = sa.size
	}
	d.size += len(name) + 2 + n + 1
	d.subs = append(d.subs, diffSub{name: name, doc: sd, arr: sa})
}

func (d *docDelta) sub(name string) *diffSub {
	for i := range d.subs {
		if d.subs[i].name == name {
			return &d.subs[i]
		}
	}
	return nil
}

func (a *arrDelta) add(idx int, e arrEntry) {
	n := 0
	switch {
	case e.doc != nil:
		n = e.doc.size
	case e.arr != nil:
		n = e.arr.size
	default:
		n = bsonValueSize(e.value)
	}
	a.size += 1 + len(strconv.Itoa(idx)) + 2 + n
	a.entries[idx] = e
}

func (a *arrDelta) setResize(n int) {
	a.resize = n
	a.size += 1 + 4 + 2
}

// computeDocDiff is the server's document delta of pre -> post, or nil when
// the delta is not smaller than post (padding is added to the delta size).
func computeDocDiff(pre, post bson.D, padding int) *docDelta {
	node := newDocDelta(padding)
	deletes := map[string]bool{}
	i, j := 0, 0
	for i < len(pre) && j < len(post) {
		pv, nv := pre[i], post[j]
		if pv.Key == nv.Key && identical(pv.Value, nv.Value) {
			i, j = i+1, j+1
			continue
		}
		if pv.Key == nv.Key {
			subDiff(node, pv.Key, pv.Value, nv.Value)
			i, j = i+1, j+1
			continue
		}
		deletes[pv.Key] = true
		i++
	}
	for ; i < len(pre); i++ {
		node.addDelete(pre[i].Key)
	}
	for ; j < len(post); j++ {
		node.addInsert(post[j].Key, post[j].Value)
		delete(deletes, post[j].Key)
	}
	names := make([]string, 0, len(deletes))
	for k := range deletes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		node.addDelete(k)
	}
	if bsonValueSize(post) > node.size {
		return node
	}
	return nil
}

// subDiff records the change of field name from ov to nv in node: a
// sub-diff when both are documents or both arrays and the sub-diff is
// small enough, else an update with the new value.
func subDiff(node *docDelta, name string, ov, nv any) {
	switch n := nv.(type) {
	case bson.D:
		if o, ok := ov.(bson.D); ok {
			if sd := computeDocDiff(o, n, 0); sd != nil {
				node.addSub(name, sd, nil)
				return
			}
		}
	case bson.A:
		if o, ok := ov.(bson.A); ok {
			if sa := computeArrayDiff(o, n); sa != nil {
				node.addSub(name, nil, sa)
				return
			}
		}
	}
	node.addUpdate(name, nv)
}

// computeArrayDiff is the server's array delta of pre -> post, or nil when
// it is not smaller than post.
func computeArrayDiff(pre, post bson.A) *arrDelta {
	node := newArrDelta()
	n := 0
	for ; n < len(pre) && n < len(post); n++ {
		if identical(pre[n], post[n]) {
			continue
		}
		e := arrEntry{value: post[n]}
		switch nv := post[n].(type) {
		case bson.D:
			if o, ok := pre[n].(bson.D); ok {
				if sd := computeDocDiff(o, nv, 0); sd != nil {
					e = arrEntry{doc: sd}
				}
			}
		case bson.A:
			if o, ok := pre[n].(bson.A); ok {
				if sa := computeArrayDiff(o, nv); sa != nil {
					e = arrEntry{arr: sa}
				}
			}
		}
		node.add(n, e)
	}
	for ; n < len(post); n++ {
		node.add(n, arrEntry{value: post[n]})
	}
	if len(pre) > len(post) {
		node.setResize(len(post))
	}
	if bsonValueSize(post) > node.size {
		return node
	}
	return nil
}

// describe appends the change-stream description of d (at path prefix,
// "" or ending in ".") to res.
func (d *docDelta) describe(prefix string, res *UpdateResult) {
	for _, l := range d.updates {
		res.UpdatedFields = append(res.UpdatedFields, bson.E{Key: prefix + l.name, Value: l.value})
	}
	for _, l := range d.inserts {
		res.UpdatedFields = append(res.UpdatedFields, bson.E{Key: prefix + l.name, Value: l.value})
	}
	for _, n := range d.deletes {
		res.RemovedFields = append(res.RemovedFields, prefix+n)
	}
	for _, s := range d.subs {
		if s.doc != nil {
			s.doc.describe(prefix+s.name+".", res)
		} else {
			s.arr.describe(prefix+s.name, res)
		}
	}
}

func (a *arrDelta) describe(path string, res *UpdateResult) {
	if a.resize >= 0 {
		res.TruncatedArrays = append(res.TruncatedArrays, Truncation{Field: path, NewSize: int32(a.resize)})
	}
	idxs := make([]int, 0, len(a.entries))
	for i := range a.entries {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for _, i := range idxs {
		e := a.entries[i]
		p := path + "." + strconv.Itoa(i)
		switch {
		case e.doc != nil:
			e.doc.describe(p+".", res)
		case e.arr != nil:
			e.arr.describe(p, res)
		default:
			res.UpdatedFields = append(res.UpdatedFields, bson.E{Key: p, Value: e.value})
		}
	}
}

// ---------------------------------------------------------------- modifier logs

// logKind is how a modifier touched a path.
type logKind byte

const (
	logUpdated logKind = 'u' // an existing field or array element got a new value
	logCreated logKind = 'i' // a new field (possibly a whole new sub-document)
	logDeleted logKind = 'd' // a field was removed
)

// logEntry is one path a modifier update touched; idx[i] tells whether
// parts[i] is an array index.
type logEntry struct {
	parts []string
	idx   []bool
	kind  logKind
}

func (e logEntry) path() string {
	s := e.parts[0]
	for _, p := range e.parts[1:] {
		s += "." + p
	}
	return s
}

// describeLog turns the log of a modifier update into res's
// updatedFields/removedFields, reading the values from the final document
// doc. Entries below an updated or created path are folded into it.
func describeLog(doc bson.D, log []logEntry, res *UpdateResult) {
	whole := map[string]bool{}
	for _, e := range log {
		if e.kind != logDeleted {
			whole[e.path()] = true
		}
	}
	root := newDocDelta(0)
	seen := map[string]bool{}
	for _, e := range log {
		p := e.path()
		if seen[p] {
			continue
		}
		seen[p] = true
		covered := false
		for i := 1; i < len(e.parts); i++ {
			if whole[(logEntry{parts: e.parts[:i]}).path()] {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		var v any
		if e.kind != logDeleted {
			var ok bool
			if v, ok = GetPath(doc, p); !ok {
				continue
			}
		}
		addLogged(root, e, v)
	}
	root.describe("", res)
}

// addLogged places one log entry in the delta tree, creating sub-diff nodes
// (arrays where the next component is an index) on the way.
func addLogged(root *docDelta, e logEntry, v any) {
	var curDoc = root
	var curArr *arrDelta
	for i, part := range e.parts {
		last := i == len(e.parts)-1
		nextIsIdx := !last && e.idx[i+1]
		if curArr != nil {
			n, _ := strconv.Atoi(part)
			if last {
				curArr.entries[n] = arrEntry{value: v}
				return
			}
			ent, ok := curArr.entries[n]
			if !ok || (ent.doc == nil && ent.arr == nil) {
				ent = arrEntry{}
				if nextIsIdx {
					ent.arr = newArrDelta()
				} else {
					ent.doc = newDocDelta(0)
				}
				curArr.entries[n] = ent
			}
			curDoc, curArr = ent.doc, ent.arr
			continue
		}
		if last {
			switch e.kind {
			case logDeleted:
				curDoc.deletes = append(curDoc.deletes, part)
			case logCreated:
				curDoc.inserts = append(curDoc.inserts, diffLeaf{part, v})
			default:
				curDoc.updates = append(curDoc.updates, diffLeaf{part, v})
			}
			return
		}
		s := curDoc.sub(part)
		if s == nil {
			if nextIsIdx {
				curDoc.subs = append(curDoc.subs, diffSub{name: part, arr: newArrDelta()})
			} else {
				curDoc.subs = append(curDoc.subs, diffSub{name: part, doc: newDocDelta(0)})
			}
			s = &curDoc.subs[len(curDoc.subs)-1]
		}
		curDoc, curArr = s.doc, s.arr
	}
}

// DescriptionDoc renders the change description as the
// updateDescription document of a change event:
// {updatedFields, removedFields, truncatedArrays: [{field, newSize}]}.
func (r *UpdateResult) DescriptionDoc() bson.D {
	uf := r.UpdatedFields
	if uf == nil {
		uf = bson.D{}
	}
	rf := bson.A{}
	for _, f := range r.RemovedFields {
		rf = append(rf, f)
	}
	ta := bson.A{}
	for _, t := range r.TruncatedArrays {
		ta = append(ta, bson.D{{Key: "field", Value: t.Field}, {Key: "newSize", Value: t.NewSize}})
	}
	return bson.D{{Key: "updatedFields", Value: uf}, {Key: "removedFields", Value: rf}, {Key: "truncatedArrays", Value: ta}}
}
