package query

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Change descriptions (updateDescription of change-stream update events).
//
// Modifier updates are described by the paths the modifiers touched, the
// way the server's $v:2 oplog diff records them:
//   - a field set (or created) is reported at its own dotted path with its
//     new value: $set {"a.b": 1} gives "a.b"; a $set of a whole
//     sub-document gives that field with the whole new value;
//   - when intermediate documents had to be created, the top-most created
//     field is reported with its whole value ($set {"x.y.z": 1} on {}
//     gives "x": {y: {z: 1}});
//   - array elements are reported in dot notation ("arr.1"); padding nulls
//     added by setting past the end are reported one by one;
//   - $push/$addToSet that only append report each new element as
//     "arr.N"; any other array change ($pull, $pullAll, $pop, $push with
//     $position/$sort/$slice that alters existing elements) reports the
//     whole array "arr";
//   - $unset (and the source of $rename) go to removedFields; $unset of an
//     array element sets it to null and reports "arr.N": null;
//   - modifications that leave a value binary-identical are not reported,
//     and an update with nothing reported is a no-op (Changed false).
// truncatedArrays is always empty for modifier updates.
//
// Pipeline updates are described by diffDocs, the difference between the
// old and the new document (see there).

// logToDescription turns the logged paths of a modifier update into
// updatedFields/removedFields, reading the values from the final document.
// Paths below another reported path are folded into it.
func logToDescription(doc bson.D, updated, removed []string) (bson.D, []string) {
	set := map[string]bool{}
	for _, p := range updated {
		set[p] = true
	}
	covered := func(p string) bool {
		for i := 0; i < len(p); i++ {
			if p[i] == '.' && set[p[:i]] {
				return true
			}
		}
		return false
	}
	uf := bson.D{}
	seen := map[string]bool{}
	for _, p := range updated {
		if seen[p] || covered(p) {
			continue
		}
		seen[p] = true
		if v, ok := GetPath(doc, p); ok {
			uf = append(uf, bson.E{Key: p, Value: v})
		}
	}
	rf := []string{}
	for _, p := range removed {
		if seen[p] || set[p] || covered(p) {
			continue
		}
		seen[p] = true
		rf = append(rf, p)
	}
	return uf, rf
}

// diffDocs records in res the difference from old to nw, with prefix the
// dotted path of the documents ("" at the top, else ending in "."):
//   - fields of old missing from nw -> removedFields;
//   - new fields, fields whose type changed and scalars that changed ->
//     updatedFields with the new value;
//   - a field that is a document on both sides is compared recursively
//     ("a.b"), an array on both sides element-wise (see diffArrays);
//   - a field that kept its value but moved before fields that used to
//     precede it is reported with its whole value (the server re-inserts it).
func diffDocs(old, nw bson.D, prefix string, res *UpdateResult) {
	oldIdx := make(map[string]int, len(old))
	for i, e := range old {
		if _, dup := oldIdx[e.Key]; !dup {
			oldIdx[e.Key] = i
		}
	}
	inNew := make(map[string]bool, len(nw))
	for _, e := range nw {
		inNew[e.Key] = true
	}
	for _, e := range old {
		if !inNew[e.Key] {
			res.RemovedFields = append(res.RemovedFields, prefix+e.Key)
		}
	}
	last := -1
	for _, e := range nw {
		i, ok := oldIdx[e.Key]
		if !ok || i < last {
			res.UpdatedFields = append(res.UpdatedFields, bson.E{Key: prefix + e.Key, Value: e.Value})
			continue
		}
		last = i
		diffValues(old[i].Value, e.Value, prefix+e.Key, res)
	}
}

func diffValues(ov, nv any, path string, res *UpdateResult) {
	if identical(ov, nv) {
		return
	}
	switch n := nv.(type) {
	case bson.D:
		if o, ok := ov.(bson.D); ok {
			diffDocs(o, n, path+".", res)
			return
		}
	case bson.A:
		if o, ok := ov.(bson.A); ok {
			diffArrays(o, n, path, res)
			return
		}
	}
	res.UpdatedFields = append(res.UpdatedFields, bson.E{Key: path, Value: nv})
}

// diffArrays compares arrays element-wise: changed elements are reported as
// "arr.i" (recursing into documents and arrays present at i on both sides),
// appended elements as "arr.i", and an array that got shorter as a
// truncation {field: "arr", newSize: len(new)}.
func diffArrays(old, nw bson.A, path string, res *UpdateResult) {
	for i, v := range nw {
		p := path + "." + strconv.Itoa(i)
		if i < len(old) {
			diffValues(old[i], v, p, res)
		} else {
			res.UpdatedFields = append(res.UpdatedFields, bson.E{Key: p, Value: v})
		}
	}
	if len(nw) < len(old) {
		res.TruncatedArrays = append(res.TruncatedArrays, Truncation{Field: path, NewSize: int32(len(nw))})
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
