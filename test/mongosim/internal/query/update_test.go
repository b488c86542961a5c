package query

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type qbUpdateCase struct {
	name      string
	doc       string
	u         string // Extended JSON value: document or pipeline array
	inserting bool
	filters   string // Extended JSON array of arrayFilters
	query     string // the statement's filter (for the positional $)
	want      string // new document
	updated   string // updatedFields
	removed   []string
	trunc     []Truncation
	noop      bool
	replace   bool   // expect Replacement (a "replace" event)
	code      int32  // expected error code
	msg       string // expected error message (exact) when set
}

func runUpdateCases(t *testing.T, cases []qbUpdateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := qbDoc(t, tc.doc)
			orig := qbDoc(t, tc.doc)
			opts := UpdateOptions{Inserting: tc.inserting, Env: qbEnv()}
			if tc.filters != "" {
				opts.ArrayFilters = qbVal(t, tc.filters).(bson.A)
			}
			if tc.query != "" {
				opts.Query = qbDoc(t, tc.query)
			}
			res, err := ApplyUpdate(doc, qbVal(t, tc.u), opts)
			if !identical(doc, orig) {
				t.Fatalf("input document was mutated: %s", qbJSON(doc))
			}
			if tc.code != 0 {
				if qbCode(err) != tc.code {
					t.Fatalf("want error %d, got %v", tc.code, err)
				}
				if tc.msg != "" && err.Error() != tc.msg {
					t.Fatalf("error message\n got: %s\nwant: %s", err.Error(), tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ApplyUpdate: %v", err)
			}
			if tc.noop {
				if res.Changed || len(res.UpdatedFields) != 0 || len(res.RemovedFields) != 0 {
					t.Fatalf("want no-op, got changed=%v uf=%s rf=%v", res.Changed, qbJSON(res.UpdatedFields), res.RemovedFields)
				}
				if !identical(res.Doc, orig) {
					t.Fatalf("no-op changed the doc: %s", qbJSON(res.Doc))
				}
				return
			}
			if !res.Changed {
				t.Fatalf("Changed = false")
			}
			if res.Replacement != tc.replace {
				t.Fatalf("Replacement = %v, want %v", res.Replacement, tc.replace)
			}
			if want := qbDoc(t, tc.want); !identical(res.Doc, want) {
				t.Fatalf("doc\n got: %s\nwant: %s", qbJSON(res.Doc), qbJSON(want))
			}
			if tc.updated != "" {
				if want := qbDoc(t, tc.updated); !identical(res.UpdatedFields, want) {
					t.Fatalf("updatedFields\n got: %s\nwant: %s", qbJSON(res.UpdatedFields), qbJSON(want))
				}
			}
			removed := tc.removed
			if removed == nil {
				removed = []string{}
			}
			if strings.Join(res.RemovedFields, ",") != strings.Join(removed, ",") || res.RemovedFields == nil {
				t.Fatalf("removedFields = %#v, want %#v", res.RemovedFields, removed)
			}
			if len(res.TruncatedArrays) != len(tc.trunc) || res.TruncatedArrays == nil {
				t.Fatalf("truncatedArrays = %#v, want %#v", res.TruncatedArrays, tc.trunc)
			}
			for i := range tc.trunc {
				if res.TruncatedArrays[i] != tc.trunc[i] {
					t.Fatalf("truncatedArrays = %#v, want %#v", res.TruncatedArrays, tc.trunc)
				}
			}
			if !res.Replacement {
				// A consumer applying the description to the old document
				// must get the new one.
				if got := qbReplay(t, orig, res); !identical(got, res.Doc) {
					t.Fatalf("replaying the description gives\n%s\nnot\n%s", qbJSON(got), qbJSON(res.Doc))
				}
			}
		})
	}
}

// qbReplay applies an update description to doc the way a change-stream
// consumer would: truncations, then removals, then dotted sets (numeric
// components index arrays, padding with nulls).
func qbReplay(t *testing.T, doc bson.D, res *UpdateResult) bson.D {
	t.Helper()
	var set func(cur any, parts []string, v any, remove bool) any
	set = func(cur any, parts []string, v any, remove bool) any {
		switch c := cur.(type) {
		case bson.D:
			if len(parts) == 1 {
				if remove {
					return withoutField(c, parts[0])
				}
				return withField(c, parts[0], v)
			}
			child, _ := docField(c, parts[0])
			if child == nil {
				child = bson.D{}
			}
			return withField(c, parts[0], set(child, parts[1:], v, remove))
		case bson.A:
			i, ok := arrIndex(parts[0])
			if !ok {
				t.Fatalf("replay: non-index %q into array", parts[0])
			}
			out := append(bson.A{}, c...)
			for len(out) <= i {
				out = append(out, nil)
			}
			if len(parts) == 1 {
				out[i] = v
				return out
			}
			out[i] = set(out[i], parts[1:], v, remove)
			return out
		}
		t.Fatalf("replay: cannot descend into %T", cur)
		return nil
	}
	cur := doc
	for _, tr := range res.TruncatedArrays {
		v, _ := GetPath(cur, tr.Field)
		cur = set(cur, strings.Split(tr.Field, "."), v.(bson.A)[:tr.NewSize], false).(bson.D)
	}
	for _, f := range res.RemovedFields {
		cur = set(cur, strings.Split(f, "."), nil, true).(bson.D)
	}
	for _, e := range res.UpdatedFields {
		cur = set(cur, strings.Split(e.Key, "."), e.Value, false).(bson.D)
	}
	return cur
}

func TestQueryUpdateModifiers(t *testing.T) {
	const base = `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}}`
	runUpdateCases(t, []qbUpdateCase{
		// $set
		{name: "set new field", doc: base, u: `{"$set": {"b": 2}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}, "b": 2}`, updated: `{"b": 2}`},
		{name: "set existing keeps position", doc: base, u: `{"$set": {"a": 5}}`,
			want: `{"_id": 1, "a": 5, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}}`, updated: `{"a": 5}`},
		{name: "set same value is a no-op", doc: base, u: `{"$set": {"a": 1, "s": "str"}}`, noop: true},
		{name: "set numeric type change is a change", doc: `{"_id": 1, "a": 1}`, u: `{"$set": {"a": 1.0}}`,
			want: `{"_id": 1, "a": 1.0}`, updated: `{"a": 1.0}`},
		{name: "set new fields appended in name order", doc: `{"_id": 1}`, u: `{"$set": {"z": 1, "b": 2}, "$inc": {"m": 1}}`,
			want: `{"_id": 1, "b": 2, "m": 1, "z": 1}`, updated: `{"b": 2, "m": 1, "z": 1}`},
		{name: "numeric field names ordered numerically", doc: `{"_id": 1, "o": {}}`, u: `{"$set": {"o.10": 1, "o.9": 2, "o.b": 3, "o.a": 4}}`,
			want: `{"_id": 1, "o": {"9": 2, "10": 1, "a": 4, "b": 3}}`, updated: `{"o.9": 2, "o.10": 1, "o.a": 4, "o.b": 3}`},
		{name: "set dotted into existing subdoc", doc: base, u: `{"$set": {"sub.d": 2}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1, "d": 2}}`, updated: `{"sub.d": 2}`},
		{name: "set whole subdoc", doc: base, u: `{"$set": {"sub": {"x": 1}}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3], "sub": {"x": 1}}`, updated: `{"sub": {"x": 1}}`},
		{name: "set creates intermediate documents", doc: `{"_id": 1}`, u: `{"$set": {"x.y.z": 1}}`,
			want: `{"_id": 1, "x": {"y": {"z": 1}}}`, updated: `{"x": {"y": {"z": 1}}}`},
		{name: "two sets into one created doc", doc: `{"_id": 1}`, u: `{"$set": {"x.b": 2, "x.a": 1}}`,
			want: `{"_id": 1, "x": {"a": 1, "b": 2}}`, updated: `{"x": {"a": 1, "b": 2}}`},
		{name: "set array element", doc: base, u: `{"$set": {"arr.1": 9}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 9, 3], "sub": {"c": 1}}`, updated: `{"arr.1": 9}`},
		{name: "set past array end pads with null", doc: `{"_id": 1, "arr": [1]}`, u: `{"$set": {"arr.3": 9}}`,
			want: `{"_id": 1, "arr": [1, null, null, 9]}`, updated: `{"arr.3": 9}`},
		{name: "set field of array element doc", doc: `{"_id": 1, "arr": [{"k": 1}, {"k": 2}]}`, u: `{"$set": {"arr.1.k": 3}}`,
			want: `{"_id": 1, "arr": [{"k": 1}, {"k": 3}]}`, updated: `{"arr.1.k": 3}`},
		{name: "set through scalar", doc: base, u: `{"$set": {"a.b": 1}}`, code: 28,
			msg: "Cannot create field 'b' in element {a: 1}"},
		{name: "set through null", doc: `{"_id": 1, "a": null}`, u: `{"$set": {"a.b": 1}}`, code: 28},
		{name: "set field name on array", doc: base, u: `{"$set": {"arr.x": 1}}`, code: 28},
		{name: "set empty path part", doc: base, u: `{"$set": {"a..b": 1}}`, code: 56},
		// $unset
		{name: "unset", doc: base, u: `{"$unset": {"a": "", "sub.c": 1}}`,
			want: `{"_id": 1, "s": "str", "arr": [1, 2, 3], "sub": {}}`, removed: []string{"a", "sub.c"}, updated: `{}`},
		{name: "unset missing is a no-op", doc: base, u: `{"$unset": {"zz": "", "a.b": "", "arr.x": ""}}`, noop: true},
		{name: "unset array element sets null", doc: base, u: `{"$unset": {"arr.0": ""}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [null, 2, 3], "sub": {"c": 1}}`, updated: `{"arr.0": null}`},
		// $inc / $mul
		{name: "inc", doc: base, u: `{"$inc": {"a": 2, "n": {"$numberLong": "3"}}}`,
			want:    `{"_id": 1, "a": 3, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}, "n": {"$numberLong": "3"}}`,
			updated: `{"a": 3, "n": {"$numberLong": "3"}}`},
		{name: "inc int32 overflow widens", doc: `{"_id": 1, "a": 2147483647}`, u: `{"$inc": {"a": 1}}`,
			want: `{"_id": 1, "a": {"$numberLong": "2147483648"}}`},
		{name: "inc decimal", doc: `{"_id": 1, "a": {"$numberDecimal": "1.10"}}`, u: `{"$inc": {"a": 1}}`,
			want: `{"_id": 1, "a": {"$numberDecimal": "2.10"}}`},
		{name: "inc double", doc: `{"_id": 1, "a": 1}`, u: `{"$inc": {"a": 0.5}}`, want: `{"_id": 1, "a": 1.5}`},
		{name: "inc by zero is a no-op", doc: base, u: `{"$inc": {"a": 0}}`, noop: true},
		{name: "inc non-numeric field", doc: base, u: `{"$inc": {"s": 1}}`, code: 14,
			msg: "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 's' of non-numeric type string"},
		{name: "inc non-numeric argument", doc: base, u: `{"$inc": {"a": "x"}}`, code: 14,
			msg: `Cannot increment with non-numeric argument: {a: "x"}`},
		{name: "mul", doc: base, u: `{"$mul": {"a": 3}}`,
			want: `{"_id": 1, "a": 3, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}}`},
		{name: "mul missing sets zero of argument type", doc: `{"_id": 1}`, u: `{"$mul": {"a": {"$numberLong": "3"}}}`,
			want: `{"_id": 1, "a": {"$numberLong": "0"}}`},
		{name: "mul non-numeric", doc: base, u: `{"$mul": {"s": 2}}`, code: 14},
		// $bit
		{name: "bit and or xor", doc: `{"_id": 1, "a": 13, "b": {"$numberLong": "1"}}`, u: `{"$bit": {"a": {"and": 10, "or": 1}, "b": {"xor": 3}, "c": {"or": 4}}}`,
			want: `{"_id": 1, "a": 9, "b": {"$numberLong": "2"}, "c": 4}`, updated: `{"a": 9, "b": {"$numberLong": "2"}, "c": 4}`},
		{name: "bit no-op", doc: `{"_id": 1, "a": 1}`, u: `{"$bit": {"a": {"or": 1}}}`, noop: true},
		{name: "bit on double", doc: `{"_id": 1, "a": 1.5}`, u: `{"$bit": {"a": {"or": 1}}}`, code: 2},
		// $min / $max
		{name: "min lowers", doc: base, u: `{"$min": {"a": 0}}`, want: `{"_id": 1, "a": 0, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}}`},
		{name: "min keeps", doc: base, u: `{"$min": {"a": 5}}`, noop: true},
		{name: "max raises", doc: base, u: `{"$max": {"a": 5, "new": 1}}`,
			want: `{"_id": 1, "a": 5, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}, "new": 1}`, updated: `{"a": 5, "new": 1}`},
		{name: "max keeps equal", doc: base, u: `{"$max": {"a": 1.0}}`, noop: true},
		{name: "max date", doc: `{"_id": 1, "t": {"$date": "2020-01-01T00:00:00Z"}}`, u: `{"$max": {"t": {"$date": "2021-01-01T00:00:00Z"}}}`,
			want: `{"_id": 1, "t": {"$date": "2021-01-01T00:00:00Z"}}`},
		// $rename
		{name: "rename", doc: base, u: `{"$rename": {"a": "z"}}`,
			want: `{"_id": 1, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}, "z": 1}`, updated: `{"z": 1}`, removed: []string{"a"}},
		{name: "rename into subdoc", doc: base, u: `{"$rename": {"a": "sub.a"}}`,
			want: `{"_id": 1, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1, "a": 1}}`, updated: `{"sub.a": 1}`, removed: []string{"a"}},
		{name: "rename missing source is a no-op", doc: base, u: `{"$rename": {"nope": "z"}}`, noop: true},
		{name: "rename same", doc: base, u: `{"$rename": {"a": "a"}}`, code: 2},
		{name: "rename non-string", doc: base, u: `{"$rename": {"a": 1}}`, code: 2},
		{name: "rename through array", doc: `{"_id": 1, "arr": [{"a": 1}]}`, u: `{"$rename": {"arr.0.a": "b"}}`, code: 2,
			msg: "The source field cannot be an array element, 'arr.0.a' in doc with _id: 1 has an array field called 'arr'"},
		{name: "rename missing source through array is a no-op", doc: `{"_id": 1, "arr": [{"a": 1}]}`, u: `{"$rename": {"arr.0.x": "b"}}`, noop: true},
		{name: "rename into array", doc: `{"_id": 1, "a": 1, "arr": [{"x": 1}]}`, u: `{"$rename": {"a": "arr.0.b"}}`, code: 2},
		{name: "rename non-viable source", doc: `{"_id": 1, "a": 1}`, u: `{"$rename": {"a.b": "c"}}`, code: 28,
			msg: "cannot use the part (b of a.b) to traverse the element ({a: 1})"},
		{name: "rename _id", doc: `{"_id": 1, "a": 1}`, u: `{"$rename": {"_id": "x"}}`, code: 66,
			msg: "Unsetting the path '_id' using $rename would modify the immutable field '_id'"},
		{name: "rename onto identical value only unsets", doc: `{"_id": 1, "a": 5, "b": 5}`, u: `{"$rename": {"a": "b"}}`,
			want: `{"_id": 1, "b": 5}`, updated: `{}`, removed: []string{"a"}},
		{name: "rename dynamic", doc: base, u: `{"$rename": {"arr.$[]": "b"}}`, code: 2},
		// $setOnInsert
		{name: "setOnInsert ignored on update", doc: base, u: `{"$setOnInsert": {"x": 1}}`, noop: true},
		{name: "setOnInsert applied on insert", doc: `{"_id": 1}`, u: `{"$setOnInsert": {"x": 1}, "$set": {"y": 2}}`, inserting: true,
			want: `{"_id": 1, "x": 1, "y": 2}`},
		// $currentDate
		{name: "currentDate", doc: `{"_id": 1}`, u: `{"$currentDate": {"d": true, "t": {"$type": "timestamp"}, "e": {"$type": "date"}}}`,
			want: `{"_id": 1, "d": {"$date": "2026-01-02T03:04:05Z"}, "e": {"$date": "2026-01-02T03:04:05Z"}, "t": {"$timestamp": {"t": 100, "i": 2}}}`},
		{name: "currentDate bad type", doc: `{"_id": 1}`, u: `{"$currentDate": {"d": {"$type": "x"}}}`, code: 2},
		// $push
		{name: "push appends", doc: base, u: `{"$push": {"arr": 4}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3, 4], "sub": {"c": 1}}`, updated: `{"arr.3": 4}`},
		{name: "push to missing creates array", doc: `{"_id": 1}`, u: `{"$push": {"arr": 4}}`,
			want: `{"_id": 1, "arr": [4]}`, updated: `{"arr": [4]}`},
		{name: "push to empty array reports whole array", doc: `{"_id": 1, "arr": []}`, u: `{"$push": {"arr": 1}}`,
			want: `{"_id": 1, "arr": [1]}`, updated: `{"arr": [1]}`},
		{name: "push position past end is an append", doc: `{"_id": 1, "arr": [1]}`, u: `{"$push": {"arr": {"$each": [2], "$position": 5}}}`,
			want: `{"_id": 1, "arr": [1, 2]}`, updated: `{"arr.1": 2}`},
		{name: "push slice that trims reports whole array", doc: `{"_id": 1, "arr": [1, 2]}`, u: `{"$push": {"arr": {"$each": [3], "$slice": 2}}}`,
			want: `{"_id": 1, "arr": [1, 2]}`, noop: true},
		{name: "push slice -2 reports whole array", doc: `{"_id": 1, "arr": [1, 2]}`, u: `{"$push": {"arr": {"$each": [3], "$slice": -2}}}`,
			want: `{"_id": 1, "arr": [2, 3]}`, updated: `{"arr": [2, 3]}`},
		{name: "push each not first", doc: `{"_id": 1, "arr": [1]}`, u: `{"$push": {"arr": {"$slice": 5, "$each": [2]}}}`,
			want: `{"_id": 1, "arr": [1, 2]}`, updated: `{"arr.1": 2}`},
		{name: "push to non-array message", doc: `{"_id": 1, "sub": {"x": 1}}`, u: `{"$push": {"sub.x": 1}}`, code: 2,
			msg: "The field 'sub.x' must be an array but is of type int in document {_id: 1}"},
		{name: "push each", doc: `{"_id": 1, "arr": [1]}`, u: `{"$push": {"arr": {"$each": [2, 3]}}}`,
			want: `{"_id": 1, "arr": [1, 2, 3]}`, updated: `{"arr.1": 2, "arr.2": 3}`},
		{name: "push position reports whole array", doc: `{"_id": 1, "arr": [1, 2]}`, u: `{"$push": {"arr": {"$each": [0], "$position": 0}}}`,
			want: `{"_id": 1, "arr": [0, 1, 2]}`, updated: `{"arr": [0, 1, 2]}`},
		{name: "push negative position", doc: `{"_id": 1, "arr": [1, 2]}`, u: `{"$push": {"arr": {"$each": [9], "$position": -1}}}`,
			want: `{"_id": 1, "arr": [1, 9, 2]}`},
		{name: "push sort slice", doc: `{"_id": 1, "arr": [5, 1]}`, u: `{"$push": {"arr": {"$each": [3, 4], "$sort": -1, "$slice": 3}}}`,
			want: `{"_id": 1, "arr": [5, 4, 3]}`, updated: `{"arr": [5, 4, 3]}`},
		{name: "push negative slice", doc: `{"_id": 1, "arr": [1, 2]}`, u: `{"$push": {"arr": {"$each": [3], "$slice": -2}}}`,
			want: `{"_id": 1, "arr": [2, 3]}`},
		{name: "push sort by field", doc: `{"_id": 1, "arr": [{"k": 2}, {"k": 1}]}`, u: `{"$push": {"arr": {"$each": [{"k": 0}], "$sort": {"k": 1}}}}`,
			want: `{"_id": 1, "arr": [{"k": 0}, {"k": 1}, {"k": 2}]}`},
		{name: "push to non-array", doc: base, u: `{"$push": {"a": 1}}`, code: 2},
		{name: "push bad clause", doc: base, u: `{"$push": {"arr": {"$each": [1], "$bogus": 1}}}`, code: 2},
		{name: "push each non-array", doc: base, u: `{"$push": {"arr": {"$each": 1}}}`, code: 2},
		// $addToSet
		{name: "addToSet existing is a no-op", doc: base, u: `{"$addToSet": {"arr": 2.0}}`, noop: true},
		{name: "addToSet new", doc: base, u: `{"$addToSet": {"arr": 4}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3, 4], "sub": {"c": 1}}`, updated: `{"arr": [1, 2, 3, 4]}`},
		{name: "addToSet each dedupes", doc: `{"_id": 1, "arr": [1]}`, u: `{"$addToSet": {"arr": {"$each": [1, 2, 2, 3]}}}`,
			want: `{"_id": 1, "arr": [1, 2, 3]}`, updated: `{"arr": [1, 2, 3]}`},
		{name: "addToSet each non-array", doc: base, u: `{"$addToSet": {"arr": {"$each": 1}}}`, code: 14},
		{name: "addToSet missing", doc: `{"_id": 1}`, u: `{"$addToSet": {"tags": "x"}}`, want: `{"_id": 1, "tags": ["x"]}`, updated: `{"tags": ["x"]}`},
		{name: "addToSet non-array", doc: base, u: `{"$addToSet": {"a": 1}}`, code: 2},
		// $pull / $pullAll / $pop
		{name: "pull value", doc: base, u: `{"$pull": {"arr": 2}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 3], "sub": {"c": 1}}`, updated: `{"arr": [1, 3]}`},
		{name: "pull condition", doc: base, u: `{"$pull": {"arr": {"$gte": 2}}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1], "sub": {"c": 1}}`},
		{name: "pull document query", doc: `{"_id": 1, "objs": [{"k": 1, "x": 1}, {"k": 2}, 3]}`, u: `{"$pull": {"objs": {"k": 1}}}`,
			want: `{"_id": 1, "objs": [{"k": 2}, 3]}`},
		{name: "pull regex", doc: `{"_id": 1, "tags": ["apple", "banana", "avocado", 1]}`, u: `{"$pull": {"tags": {"$regularExpression": {"pattern": "^a", "options": ""}}}}`,
			want: `{"_id": 1, "tags": ["banana", 1]}`},
		{name: "pull in", doc: base, u: `{"$pull": {"arr": {"$in": [1, 3]}}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [2], "sub": {"c": 1}}`},
		{name: "pull nothing is a no-op", doc: base, u: `{"$pull": {"arr": 7, "missing": 1}}`, noop: true},
		{name: "pullAll", doc: base, u: `{"$pullAll": {"arr": [1, 3]}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [2], "sub": {"c": 1}}`},
		{name: "pullAll non-array", doc: base, u: `{"$pullAll": {"arr": 1}}`, code: 2},
		{name: "pop last", doc: base, u: `{"$pop": {"arr": 1}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2], "sub": {"c": 1}}`, updated: `{"arr": [1, 2]}`},
		{name: "pop first", doc: base, u: `{"$pop": {"arr": -1}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [2, 3], "sub": {"c": 1}}`},
		{name: "pop empty is a no-op", doc: `{"_id": 1, "arr": []}`, u: `{"$pop": {"arr": 1}}`, noop: true},
		{name: "pop bad arg", doc: base, u: `{"$pop": {"arr": 2}}`, code: 9},
		{name: "pop non-array", doc: base, u: `{"$pop": {"a": 1}}`, code: 14},
		// errors
		{name: "conflict same path", doc: base, u: `{"$set": {"a": 1}, "$inc": {"a": 1}}`, code: 40,
			msg: "Updating the path 'a' would create a conflict at 'a'"},
		{name: "conflict child after parent", doc: base, u: `{"$set": {"a": 1, "a.b": 1}}`, code: 40,
			msg: "Updating the path 'a.b' would create a conflict at 'a'"},
		{name: "conflict parent after child", doc: base, u: `{"$set": {"a.b": 1}, "$unset": {"a": 1}}`, code: 40,
			msg: "Updating the path 'a' would create a conflict at 'a'"},
		{name: "conflict via rename", doc: base, u: `{"$rename": {"a": "b"}, "$set": {"b": 1}}`, code: 40},
		{name: "no conflict on sibling prefix", doc: base, u: `{"$set": {"ab": 1, "a": 2}}`,
			want: `{"_id": 1, "a": 2, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}, "ab": 1}`},
		{name: "modify _id", doc: base, u: `{"$set": {"_id": 2}}`, code: 66,
			msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
		{name: "set _id to same value", doc: base, u: `{"$set": {"_id": 1, "a": 2}}`,
			want: `{"_id": 1, "a": 2, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}}`, updated: `{"a": 2}`},
		{name: "unset _id", doc: base, u: `{"$unset": {"_id": 1}}`, code: 66},
		{name: "empty modifier is a no-op (5.0+)", doc: base, u: `{"$set": {}, "$inc": {}}`, noop: true,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 2, 3], "sub": {"c": 1}}`},
		{name: "unknown modifier", doc: base, u: `{"$foo": {"a": 1}}`, code: 9,
			msg: "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array"},
		{name: "non-$ field after modifier", doc: base, u: `{"$set": {"a": 1}, "b": 1}`, code: 9},
		{name: "modifier argument not a document", doc: base, u: `{"$set": 1}`, code: 9},
		{name: "positional $ without query", doc: base, u: `{"$set": {"arr.$": 1}}`, code: 2,
			msg: "The positional operator did not find the match needed from the query."},
		{name: "positional $ on a value", doc: base, u: `{"$set": {"arr.$": 20}}`, query: `{"arr": 2}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 20, 3], "sub": {"c": 1}}`, updated: `{"arr.1": 20}`},
		{name: "positional $ with an operator", doc: base, u: `{"$inc": {"arr.$": 100}}`, query: `{"_id": 1, "arr": {"$gt": 1}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 102, 3], "sub": {"c": 1}}`},
		{name: "positional $ on a sub-field", doc: `{"_id": 1, "items": [{"id": 1, "q": 0}, {"id": 2, "q": 0}]}`,
			u: `{"$set": {"items.$.q": 5}}`, query: `{"items.id": 2}`,
			want: `{"_id": 1, "items": [{"id": 1, "q": 0}, {"id": 2, "q": 5}]}`, updated: `{"items.1.q": 5}`},
		{name: "positional $ with elemMatch", doc: `{"_id": 1, "items": [{"id": 1, "q": 0}, {"id": 2, "q": 0}]}`,
			u: `{"$unset": {"items.$.q": ""}}`, query: `{"$and": [{"items": {"$elemMatch": {"id": {"$gte": 2}}}}]}`,
			want: `{"_id": 1, "items": [{"id": 1, "q": 0}, {"id": 2}]}`, removed: []string{"items.1.q"}},
		{name: "positional $ without predicate on the array", doc: base, u: `{"$set": {"arr.$": 1}}`, query: `{"a": 1}`, code: 2},
		{name: "two positional $", doc: base, u: `{"$set": {"arr.$.x.$": 1}}`, query: `{"arr": 1}`, code: 2},
		{name: "positional $ first", doc: base, u: `{"$set": {"$": 1}}`, code: 2},
		// $[] and $[<id>]
		{name: "all positional", doc: base, u: `{"$inc": {"arr.$[]": 10}}`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [11, 12, 13], "sub": {"c": 1}}`, updated: `{"arr": [11, 12, 13]}`},
		{name: "all positional nested", doc: `{"_id": 1, "arr": [{"k": 1}, {"k": 2}]}`, u: `{"$set": {"arr.$[].k": 0}}`,
			want: `{"_id": 1, "arr": [{"k": 0}, {"k": 0}]}`, updated: `{"arr": [{"k": 0}, {"k": 0}]}`},
		{name: "all positional one element modified", doc: `{"_id": 1, "arr": [{"k": 0}, {"k": 1}]}`, u: `{"$set": {"arr.$[].k": 0}}`,
			want: `{"_id": 1, "arr": [{"k": 0}, {"k": 0}]}`, updated: `{"arr.1": {"k": 0}}`},
		{name: "all positional single element logs itself", doc: `{"_id": 1, "arr": [{"k": 1, "j": 1}]}`, u: `{"$set": {"arr.$[].k": 0}}`,
			want: `{"_id": 1, "arr": [{"k": 0, "j": 1}]}`, updated: `{"arr.0.k": 0}`},
		{name: "filtered positional", doc: base, u: `{"$set": {"arr.$[big]": 0}}`, filters: `[{"big": {"$gte": 2}}]`,
			want: `{"_id": 1, "a": 1, "s": "str", "arr": [1, 0, 0], "sub": {"c": 1}}`, updated: `{"arr": [1, 0, 0]}`},
		{name: "filtered positional on subfield", doc: `{"_id": 1, "arr": [{"k": 1, "v": 0}, {"k": 2, "v": 0}]}`,
			u: `{"$inc": {"arr.$[e].v": 1}}`, filters: `[{"e.k": 2}]`,
			want: `{"_id": 1, "arr": [{"k": 1, "v": 0}, {"k": 2, "v": 1}]}`, updated: `{"arr.1.v": 1}`},
		{name: "filtered positional nothing matches", doc: base, u: `{"$set": {"arr.$[x]": 0}}`, filters: `[{"x": 99}]`, noop: true},
		{name: "missing array filter", doc: base, u: `{"$set": {"arr.$[x]": 0}}`, code: 2,
			msg: "No array filter found for identifier 'x' in path 'arr.$[x]'"},
		{name: "unused array filter", doc: base, u: `{"$set": {"arr.$[]": 0}}`, filters: `[{"x": 1}]`, code: 9},
		{name: "positional on missing array", doc: base, u: `{"$set": {"nope.$[]": 0}}`, code: 2,
			msg: "The path 'nope' must exist in the document in order to apply array updates."},
		{name: "positional unset on missing array", doc: base, u: `{"$unset": {"nope.$[].x": 1}}`, code: 2},
		{name: "positional unset", doc: `{"_id": 1, "arr": [{"x": 1, "y": 1}, {"y": 2}]}`, u: `{"$unset": {"arr.$[].x": 1}}`,
			want: `{"_id": 1, "arr": [{"y": 1}, {"y": 2}]}`, updated: `{"arr.0": {"y": 1}}`},
		{name: "positional on non-array", doc: base, u: `{"$set": {"a.$[]": 0}}`, code: 2},
	})
}

func TestQueryUpdateReplacement(t *testing.T) {
	runUpdateCases(t, []qbUpdateCase{
		{name: "replace keeps _id", doc: `{"_id": 1, "a": 1}`, u: `{"b": 2}`, want: `{"_id": 1, "b": 2}`, replace: true},
		{name: "replace with same _id keeps its order", doc: `{"_id": 1, "a": 1}`, u: `{"b": 2, "_id": 1}`, want: `{"b": 2, "_id": 1}`, replace: true},
		{name: "replace with numerically equal _id", doc: `{"_id": 1, "a": 1}`, u: `{"_id": 1.0}`, want: `{"_id": 1.0}`, replace: true},
		{name: "replace with other _id", doc: `{"_id": 1, "a": 1}`, u: `{"_id": 2, "b": 2}`, code: 66,
			msg: "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"},
		{name: "replace with $ field", doc: `{"_id": 1, "a": 1}`, u: `{"b": 2, "$set": {"a": 1}}`, code: 52},
		{name: "identical replacement is a no-op", doc: `{"_id": 1, "a": 1}`, u: `{"_id": 1, "a": 1}`, noop: true},
		{name: "replacement without _id is never a no-op", doc: `{"_id": 1, "a": 1}`, u: `{"a": 1}`, want: `{"_id": 1, "a": 1}`, replace: true},
		{name: "empty replacement", doc: `{"_id": 1, "a": 1}`, u: `{}`, want: `{"_id": 1}`, replace: true},
	})
	res, err := ApplyUpdate(qbDoc(t, `{"_id": 1, "a": 1}`), qbVal(t, `{"b": 2}`), UpdateOptions{})
	if err != nil || !res.Replacement {
		t.Fatalf("Replacement flag not set: %v %v", res, err)
	}
	res, err = ApplyUpdate(qbDoc(t, `{"_id": 1, "a": 1}`), qbVal(t, `{"$set": {"b": 2}}`), UpdateOptions{})
	if err != nil || res.Replacement {
		t.Fatalf("Replacement flag set for a modifier update: %v %v", res, err)
	}
}

func TestQueryUpdatePipeline(t *testing.T) {
	// $$NOW is 2026-01-02T03:04:05Z in qbEnv. Documents carry a padding
	// field so that their deltas are smaller than they are (else the server
	// logs a replacement, see TestQueryUpdatePipelineReplacementFallback).
	const lease = `[{"$set": {
		"owner": {"$cond": [{"$or": [{"$lt": ["$expiresAt", "$$NOW"]}, {"$eq": ["$owner", "me"]}]}, "me", "$owner"]},
		"epoch": {"$add": [{"$ifNull": ["$epoch", 0]}, 1]},
		"expiresAt": {"$add": ["$$NOW", 60000]}}}]`
	runUpdateCases(t, []qbUpdateCase{
		{name: "lease takeover of expired lease", doc: `{"_id": "L", "owner": "other", "epoch": 3, "expiresAt": {"$date": "2026-01-01T00:00:00Z"}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			u:       lease,
			want:    `{"_id": "L", "owner": "me", "epoch": 4, "expiresAt": {"$date": "2026-01-02T03:05:05Z"}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			updated: `{"owner": "me", "epoch": 4, "expiresAt": {"$date": "2026-01-02T03:05:05Z"}}`},
		{name: "lease held by other keeps owner", doc: `{"_id": "L", "owner": "other", "epoch": 3, "expiresAt": {"$date": "2027-01-01T00:00:00Z"}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			u:       lease,
			want:    `{"_id": "L", "owner": "other", "epoch": 4, "expiresAt": {"$date": "2026-01-02T03:05:05Z"}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			updated: `{"epoch": 4, "expiresAt": {"$date": "2026-01-02T03:05:05Z"}}`},
		{name: "lease on upsert seed", doc: `{"_id": "L"}`, u: lease, inserting: true, replace: true,
			want: `{"_id": "L", "owner": "me", "epoch": 1, "expiresAt": {"$date": "2026-01-02T03:05:05Z"}}`},
		{name: "lease renew with $max", doc: `{"_id": "L", "owner": "me", "expiresAt": {"$date": "2027-01-01T00:00:00Z"}}`,
			u: `[{"$set": {"expiresAt": {"$max": ["$expiresAt", {"$add": ["$$NOW", 60000]}]}}}]`, noop: true},
		{name: "lease renew with $max advancing", doc: `{"_id": "L", "owner": "me", "expiresAt": {"$date": "2020-01-01T00:00:00Z"}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			u:       `[{"$set": {"expiresAt": {"$max": ["$expiresAt", {"$add": ["$$NOW", 60000]}]}}}]`,
			want:    `{"_id": "L", "owner": "me", "expiresAt": {"$date": "2026-01-02T03:05:05Z"}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			updated: `{"expiresAt": {"$date": "2026-01-02T03:05:05Z"}}`},
		{name: "spec test: array truncation", doc: `{"_id": 1, "a": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3]}`,
			u:    `[{"$set": {"array": ["foo", {"a": "bar"}]}}]`,
			want: `{"_id": 1, "a": 1, "array": ["foo", {"a": "bar"}]}`, updated: `{}`,
			trunc: []Truncation{{Field: "array", NewSize: 2}}},
		{name: "array element change and truncation", doc: `{"_id": 1, "arr": [1, {"a": 1, "b": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}, 3]}`,
			u:    `[{"$set": {"arr": [1, {"a": 1, "b": 5, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}]}}]`,
			want: `{"_id": 1, "arr": [1, {"a": 1, "b": 5, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}]}`, updated: `{"arr.1.b": 5}`,
			trunc: []Truncation{{Field: "arr", NewSize: 2}}},
		{name: "small array element reported whole", doc: `{"_id": 1, "arr": [1, {"a": 1, "b": 2}], "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`,
			u:    `[{"$set": {"arr": [1, {"a": 1, "b": 5}]}}]`,
			want: `{"_id": 1, "arr": [1, {"a": 1, "b": 5}], "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, updated: `{"arr.1": {"a": 1, "b": 5}}`},
		{name: "array grows", doc: `{"_id": 1, "arr": [1, "0123456789012345678901234567890123456789012345678901234567890123456789"], "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$set": {"arr": [1, "0123456789012345678901234567890123456789012345678901234567890123456789", 2]}}]`,
			want: `{"_id": 1, "arr": [1, "0123456789012345678901234567890123456789012345678901234567890123456789", 2], "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, updated: `{"arr.2": 2}`},
		{name: "nested subdocument diff", doc: `{"_id": 1, "a": {"b": 1, "c": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}, "x": 1}`, u: `[{"$set": {"a.b": 5, "y": 1}}]`,
			want: `{"_id": 1, "a": {"b": 5, "c": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}, "x": 1, "y": 1}`, updated: `{"y": 1, "a.b": 5}`},
		{name: "small subdocument reported whole", doc: `{"_id": 1, "a": {"b": 1}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$set": {"a.b": 5}}]`,
			want: `{"_id": 1, "a": {"b": 5}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, updated: `{"a": {"b": 5}}`},
		{name: "nested addFields merges into subdocument", doc: `{"_id": 1, "a": {"b": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}}`, u: `[{"$addFields": {"a": {"c": 2}}}]`,
			want: `{"_id": 1, "a": {"b": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789", "c": 2}}`, updated: `{"a.c": 2}`},
		{name: "type change reported whole", doc: `{"_id": 1, "a": {"b": 1}, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$set": {"a": 5}}]`,
			want: `{"_id": 1, "a": 5, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, updated: `{"a": 5}`},
		{name: "unset stage", doc: `{"_id": 1, "a": 1, "b": {"c": 1, "d": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}}`, u: `[{"$unset": ["a", "b.c"]}]`,
			want: `{"_id": 1, "b": {"d": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}}`, updated: `{}`, removed: []string{"a", "b.c"}},
		{name: "project stage", doc: `{"_id": 1, "a": 1, "b": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$project": {"a": 1, "pad": 1}}]`,
			want: `{"_id": 1, "a": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, removed: []string{"b"}},
		{name: "field inserted before others re-inserts them", doc: `{"_id": 1, "a": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$replaceWith": {"_id": 1, "n": 0, "a": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}}]`,
			want: `{"_id": 1, "n": 0, "a": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, replace: true},
		{name: "replaceWith stage", doc: `{"_id": 1, "a": 1, "b": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$replaceWith": {"_id": "$_id", "pad": "$pad", "z": "$a"}}]`,
			want: `{"_id": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789", "z": 1}`, updated: `{"z": 1}`, removed: []string{"a", "b"}},
		{name: "REMOVE drops field", doc: `{"_id": 1, "a": 1, "b": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$set": {"a": "$$REMOVE"}}]`,
			want: `{"_id": 1, "b": 2, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, removed: []string{"a"}},
		{name: "no-op pipeline", doc: `{"_id": 1, "a": 1}`, u: `[{"$set": {"a": 1}}]`, noop: true},
		{name: "pipeline changes _id", doc: `{"_id": 1, "a": 1}`, u: `[{"$set": {"_id": 2}}]`, code: 66},
		{name: "pipeline dropping _id keeps it", doc: `{"_id": 1, "a": 1, "pad": "0123456789012345678901234567890123456789012345678901234567890123456789"}`, u: `[{"$project": {"_id": 0, "a": 1}}]`,
			want: `{"_id": 1, "a": 1}`, replace: true},
		{name: "pipeline group not allowed", doc: `{"_id": 1}`, u: `[{"$group": {"_id": 1}}]`, code: 72},
		{name: "pipeline unknown stage", doc: `{"_id": 1}`, u: `[{"$bogus": {}}]`, code: 40324},
		{name: "pipeline unknown expression", doc: `{"_id": 1}`, u: `[{"$set": {"a": {"$bogus": 1}}}]`, code: 168},
		{name: "pipeline with arrayFilters", doc: `{"_id": 1}`, u: `[{"$set": {"a": 1}}]`, filters: `[{"x": 1}]`, code: 9},
	})
}

// A real server logs a pipeline update as a replacement when the delta is
// not smaller than the new document (plus 15 bytes): small lease documents
// rewritten by the lease pipeline give "replace" events.
func TestQueryUpdatePipelineReplacementFallback(t *testing.T) {
	runUpdateCases(t, []qbUpdateCase{
		{name: "small lease document", doc: `{"_id": "L", "owner": "other", "epoch": 3, "expiresAt": {"$date": "2026-01-01T00:00:00Z"}}`,
			u: `[{"$set": {"owner": "me", "epoch": 4, "expiresAt": {"$add": ["$$NOW", 60000]}}}]`, replace: true,
			want: `{"_id": "L", "owner": "me", "epoch": 4, "expiresAt": {"$date": "2026-01-02T03:05:05Z"}}`},
		{name: "two of four fields of a small document", doc: `{"_id": "L", "owner": "other", "epoch": 3, "expiresAt": {"$date": "2026-01-01T00:00:00Z"}}`,
			u:    `[{"$set": {"owner": "me", "epoch": 4}}]`,
			want: `{"_id": "L", "owner": "me", "epoch": 4, "expiresAt": {"$date": "2026-01-01T00:00:00Z"}}`, updated: `{"owner": "me", "epoch": 4}`},
		{name: "one small change in a small document", doc: `{"_id": 1, "a": 1}`, u: `[{"$set": {"a": 2}}]`, replace: true,
			want: `{"_id": 1, "a": 2}`},
		{name: "one small change in a larger document", doc: `{"_id": 1, "a": 1, "b": "0123456789"}`, u: `[{"$set": {"a": 2}}]`,
			want: `{"_id": 1, "a": 2, "b": "0123456789"}`, updated: `{"a": 2}`},
	})
}

func TestQueryValidateUpdate(t *testing.T) {
	tests := []struct {
		u    string
		code int32
	}{
		{`{"$set": {"a": 1}}`, 0},
		{`{"a": 1}`, 0},
		{`[{"$set": {"a": 1}}]`, 0},
		{`{"$set": {}}`, 0}, // a no-op since 5.0
		{`{"$nope": {"a": 1}}`, 9},
		{`{"$set": {"a": 1}, "$unset": {"a": 1}}`, 40},
		{`{"a": 1, "$set": {"b": 1}}`, 52},
		{`[{"$match": {}}]`, 72},
		{`[{"$foo": {}}]`, 40324},
		{`{"$inc": {"a": "1"}}`, 14},
		{`{"$bit": {"a": {"and": 1}}}`, 0},
		{`{"$bit": {"a": {"nand": 1}}}`, 2},
		{`{"$bit": {"a": {"and": 1.0}}}`, 2},
		{`[{"$set": {"a": {"$bogus": 1}}}]`, 168},
		{`[{"$set": {"a": {"$add": [1], "$sub": 1}}}]`, 15983},
		{`[{"$replaceWith": {"$regexFind": {}}}]`, 9000001},
	}
	for _, tc := range tests {
		err := ValidateUpdate(qbVal(t, tc.u))
		if tc.code == 0 && err != nil || tc.code != 0 && qbCode(err) != tc.code {
			t.Errorf("ValidateUpdate(%s) = %v, want code %d", tc.u, err, tc.code)
		}
	}
	if err := ValidateUpdate("x"); err == nil {
		t.Errorf("ValidateUpdate(string) = nil")
	}
}

func TestQueryValidateUpdateOptions(t *testing.T) {
	tests := []struct {
		u, filters string
		code       int32
	}{
		{`{"$set": {"a.$[x]": 1}}`, `[{"x": 1}]`, 0},
		{`{"$set": {"a.$[x]": 1}}`, `[]`, 2},
		{`{"$set": {"a.$[]": 1}}`, `[{"x": 1}]`, 9},
		{`{"$set": {"a.$[x]": 1}}`, `[{"x": 1}, {"x": 2}]`, 9},
		{`{"$set": {"a.$[x]": 1}}`, `[{"x": 1, "y": 2}]`, 9},
		{`{"$set": {"a.$[X]": 1}}`, `[{"X": 1}]`, 2},
		{`{"$set": {"a.$[x]": 1}}`, `[{"x": {"$bogus": 1}}]`, -2},
		{`{"a": 1}`, `[{"x": 1}]`, 9},
		{`[{"$set": {"a": 1}}]`, `[{"x": 1}]`, 9},
		{`{"$set": {}}`, `[]`, 0}, // an empty operand is a no-op since 5.0
	}
	for _, tc := range tests {
		err := ValidateUpdateOptions(qbVal(t, tc.u), UpdateOptions{ArrayFilters: qbVal(t, tc.filters).(bson.A)})
		switch {
		case tc.code == 0 && err != nil, tc.code > 0 && qbCode(err) != tc.code, tc.code < 0 && err == nil:
			t.Errorf("ValidateUpdateOptions(%s, %s) = %v, want code %d", tc.u, tc.filters, err, tc.code)
		}
	}
}

func TestQueryUpdateDescriptionDoc(t *testing.T) {
	res, err := ApplyUpdate(qbDoc(t, `{"_id": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3]}`),
		qbVal(t, `[{"$set": {"array": ["foo", {"a": "bar"}]}}]`), UpdateOptions{Env: &Env{Now: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	want := qbDoc(t, `{"updatedFields": {}, "removedFields": [], "truncatedArrays": [{"field": "array", "newSize": 2}]}`)
	if got := res.DescriptionDoc(); !identical(got, want) {
		t.Fatalf("DescriptionDoc = %s, want %s", qbJSON(got), qbJSON(want))
	}
}
