package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func qbDocs(t *testing.T, s string) []bson.D {
	t.Helper()
	arr := qbVal(t, s).(bson.A)
	out := make([]bson.D, len(arr))
	for i, x := range arr {
		out[i] = x.(bson.D)
	}
	return out
}

func TestQueryPipelineRun(t *testing.T) {
	const people = `[
		{"_id": 1, "name": "ann", "age": 30, "city": "x", "tags": ["a", "b"], "sub": {"p": 1, "q": 2}},
		{"_id": 2, "name": "bob", "age": 25, "city": "y", "tags": [], "sub": {"p": 3, "q": 4}},
		{"_id": 3, "name": "cat", "age": 35, "city": "x", "tags": null},
		{"_id": 4, "name": "dan", "age": 1.5, "city": "y"}
	]`
	tests := []struct {
		name     string
		input    string
		pipeline string
		want     string // Extended JSON array of documents
		code     int32
	}{
		{"countDocuments", people,
			`[{"$match": {"city": "x"}}, {"$skip": {"$numberLong": "0"}}, {"$limit": {"$numberLong": "5"}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]`,
			`[{"_id": 1, "n": 2}]`, 0},
		{"countDocuments skip", people,
			`[{"$match": {}}, {"$skip": {"$numberLong": "1"}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]`,
			`[{"_id": 1, "n": 3}]`, 0},
		{"countDocuments none", people,
			`[{"$match": {"city": "zz"}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]`, `[]`, 0},
		{"match with expr", people, `[{"$match": {"$expr": {"$gt": ["$age", 29]}}}, {"$project": {"name": 1, "_id": 0}}]`,
			`[{"name": "ann"}, {"name": "cat"}]`, 0},
		{"project inclusion keeps doc order and _id", people, `[{"$project": {"age": 1, "name": 1}}, {"$limit": 1}]`,
			`[{"_id": 1, "name": "ann", "age": 30}]`, 0},
		{"project exclusion", people, `[{"$project": {"tags": 0, "sub": 0, "city": 0}}, {"$limit": 2}]`,
			`[{"_id": 1, "name": "ann", "age": 30}, {"_id": 2, "name": "bob", "age": 25}]`, 0},
		{"project _id only exclusion", people, `[{"$limit": 1}, {"$project": {"_id": 0}}]`,
			`[{"name": "ann", "age": 30, "city": "x", "tags": ["a", "b"], "sub": {"p": 1, "q": 2}}]`, 0},
		{"project computed", people, `[{"$limit": 1}, {"$project": {"_id": 0, "n": {"$toUpper": "$name"}, "older": {"$add": ["$age", 1]}, "lit": {"$literal": 1}}}]`,
			`[{"n": "ANN", "older": 31, "lit": 1}]`, 0},
		{"project nested inclusion", people, `[{"$limit": 1}, {"$project": {"sub.p": 1}}]`,
			`[{"_id": 1, "sub": {"p": 1}}]`, 0},
		{"project nested object form", people, `[{"$limit": 1}, {"$project": {"sub": {"q": 1}, "_id": 0}}]`,
			`[{"sub": {"q": 2}}]`, 0},
		{"project nested exclusion", people, `[{"$limit": 1}, {"$project": {"sub.p": 0, "tags": 0, "_id": 0, "city": 0, "age": 0}}]`,
			`[{"name": "ann", "sub": {"q": 2}}]`, 0},
		{"project through arrays", `[{"_id": 1, "a": [{"b": 1, "c": 2}, 5, {"c": 3}]}]`, `[{"$project": {"a.b": 1}}]`,
			`[{"_id": 1, "a": [{"b": 1}, {}]}]`, 0},
		{"project exclusion through arrays", `[{"_id": 1, "a": [{"b": 1, "c": 2}, 5]}]`, `[{"$project": {"a.b": 0}}]`,
			`[{"_id": 1, "a": [{"c": 2}, 5]}]`, 0},
		{"project _id only inclusion", people, `[{"$limit": 1}, {"$project": {"_id": 1}}]`, `[{"_id": 1}]`, 0},
		{"project exclusion with _id 1", people, `[{"$limit": 1}, {"$project": {"_id": 1, "tags": 0, "sub": 0, "city": 0}}]`,
			`[{"_id": 1, "name": "ann", "age": 30}]`, 0},
		{"project mixed", people, `[{"$project": {"a": 1, "b": 0}}]`, ``, 31254},
		{"project mixed other way", people, `[{"$project": {"b": 0, "a": 1}}]`, ``, 31253},
		{"project empty", people, `[{"$project": {}}]`, ``, 51272},
		{"project path collision", people, `[{"$project": {"a": 1, "a.b": 1}}]`, ``, 31250},
		{"addFields", people, `[{"$limit": 1}, {"$addFields": {"x": 1, "name": "$city", "sub.r": "$age"}}]`,
			`[{"_id": 1, "name": "x", "age": 30, "city": "x", "tags": ["a", "b"], "sub": {"p": 1, "q": 2, "r": 30}, "x": 1}]`, 0},
		{"set alias and array fan-out", `[{"_id": 1, "a": [{"b": 1}, 2]}]`, `[{"$set": {"a.c": 0}}]`,
			`[{"_id": 1, "a": [{"b": 1, "c": 0}, {"c": 0}]}]`, 0},
		{"addFields REMOVE", people, `[{"$limit": 1}, {"$addFields": {"tags": "$$REMOVE", "sub": "$$REMOVE", "city": "$$REMOVE"}}]`,
			`[{"_id": 1, "name": "ann", "age": 30}]`, 0},
		{"unset", people, `[{"$limit": 1}, {"$unset": ["tags", "sub.q", "city"]}]`,
			`[{"_id": 1, "name": "ann", "age": 30, "sub": {"p": 1}}]`, 0},
		{"unset string", people, `[{"$limit": 1}, {"$unset": "sub"}, {"$unset": ["tags", "city", "age"]}]`,
			`[{"_id": 1, "name": "ann"}]`, 0},
		{"unset bad", people, `[{"$unset": 1}]`, ``, 31002},
		{"replaceRoot", people, `[{"$limit": 2}, {"$replaceRoot": {"newRoot": "$sub"}}]`,
			`[{"p": 1, "q": 2}, {"p": 3, "q": 4}]`, 0},
		{"replaceWith", people, `[{"$limit": 1}, {"$replaceWith": {"n": "$name"}}]`, `[{"n": "ann"}]`, 0},
		{"replaceRoot non-document", people, `[{"$replaceRoot": {"newRoot": "$sub"}}]`, ``, 40228},
		{"sort", people, `[{"$sort": {"age": -1}}, {"$project": {"_id": 1}}]`, `[{"_id": 3}, {"_id": 1}, {"_id": 2}, {"_id": 4}]`, 0},
		{"sort bad", people, `[{"$sort": {"age": 2}}]`, ``, 15975},
		{"sort empty", people, `[{"$sort": {}}]`, ``, 15976},
		{"skip limit", people, `[{"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}]`, `[{"_id": 2}, {"_id": 3}]`, 0},
		{"skip past end", people, `[{"$skip": 10}]`, `[]`, 0},
		{"limit zero", people, `[{"$limit": 0}]`, ``, 15958},
		{"limit string", people, `[{"$limit": "1"}]`, ``, 15957},
		{"skip negative", people, `[{"$skip": -1}]`, ``, 15956},
		{"group by field", people,
			`[{"$group": {"_id": "$city", "n": {"$sum": 1}, "total": {"$sum": "$age"}, "avg": {"$avg": "$age"}, "min": {"$min": "$age"}, "max": {"$max": "$name"}, "first": {"$first": "$name"}, "last": {"$last": "$name"}, "names": {"$push": "$name"}, "cities": {"$addToSet": "$city"}, "c": {"$count": {}}}}]`,
			`[{"_id": "x", "n": 2, "total": 65, "avg": 32.5, "min": 30, "max": "cat", "first": "ann", "last": "cat", "names": ["ann", "cat"], "cities": ["x"], "c": 2},
			  {"_id": "y", "n": 2, "total": 26.5, "avg": 13.25, "min": 1.5, "max": "dan", "first": "bob", "last": "dan", "names": ["bob", "dan"], "cities": ["y"], "c": 2}]`, 0},
		{"group null id", people, `[{"$group": {"_id": null, "n": {"$sum": 1}}}]`, `[{"_id": null, "n": 4}]`, 0},
		{"group missing key groups with null", `[{"_id": 1, "k": null}, {"_id": 2}, {"_id": 3, "k": 1}]`,
			`[{"$group": {"_id": "$k", "ids": {"$push": "$_id"}}}]`, `[{"_id": null, "ids": [1, 2]}, {"_id": 1, "ids": [3]}]`, 0},
		{"group compound id", people, `[{"$group": {"_id": {"c": "$city", "old": {"$gte": ["$age", 30]}}, "n": {"$sum": 1}}}]`,
			`[{"_id": {"c": "x", "old": true}, "n": 2}, {"_id": {"c": "y", "old": false}, "n": 2}]`, 0},
		{"group numeric keys unify", `[{"_id": 1, "k": 1}, {"_id": 2, "k": 1.0}, {"_id": 3, "k": {"$numberLong": "1"}}]`,
			`[{"$group": {"_id": "$k", "n": {"$sum": 1}}}]`, `[{"_id": 1, "n": 3}]`, 0},
		{"group sum typing overflow", `[{"_id": 1, "v": 2147483647}, {"_id": 2, "v": 1}]`,
			`[{"$group": {"_id": null, "s": {"$sum": "$v"}}}]`, `[{"_id": null, "s": {"$numberLong": "2147483648"}}]`, 0},
		{"group sum ignores non-numbers", `[{"_id": 1, "v": "x"}, {"_id": 2}]`,
			`[{"$group": {"_id": null, "s": {"$sum": "$v"}, "a": {"$avg": "$v"}, "m": {"$max": "$v"}, "f": {"$first": "$nope"}}}]`,
			`[{"_id": null, "s": 0, "a": null, "m": "x", "f": null}]`, 0},
		{"group without _id", people, `[{"$group": {"n": {"$sum": 1}}}]`, ``, 15955},
		{"group unknown accumulator", people, `[{"$group": {"_id": null, "n": {"$foo": 1}}}]`, ``, 15952},
		{"group dotted field", people, `[{"$group": {"_id": null, "a.b": {"$sum": 1}}}]`, ``, 40235},
		{"count", people, `[{"$match": {"city": "x"}}, {"$count": "total"}]`, `[{"total": 2}]`, 0},
		{"count empty", people, `[{"$match": {"city": "zz"}}, {"$count": "total"}]`, `[]`, 0},
		{"count bad name", people, `[{"$count": "$x"}]`, ``, 40158},
		{"unwind", people, `[{"$unwind": "$tags"}, {"$project": {"tags": 1}}]`,
			`[{"_id": 1, "tags": "a"}, {"_id": 1, "tags": "b"}]`, 0},
		{"unwind preserve and index", people,
			`[{"$unwind": {"path": "$tags", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"}}, {"$project": {"tags": 1, "i": 1}}]`,
			`[{"_id": 1, "tags": "a", "i": {"$numberLong": "0"}}, {"_id": 1, "tags": "b", "i": {"$numberLong": "1"}}, {"_id": 2, "i": null}, {"_id": 3, "tags": null, "i": null}, {"_id": 4, "i": null}]`, 0},
		{"unwind scalar", `[{"_id": 1, "v": 5}]`, `[{"$unwind": "$v"}]`, `[{"_id": 1, "v": 5}]`, 0},
		{"unwind nested path", `[{"_id": 1, "a": {"b": [1, 2]}}]`, `[{"$unwind": "$a.b"}]`,
			`[{"_id": 1, "a": {"b": 1}}, {"_id": 1, "a": {"b": 2}}]`, 0},
		{"unwind no $", people, `[{"$unwind": "tags"}]`, ``, 28818},
		{"sortByCount", people, `[{"$unwind": "$tags"}, {"$sortByCount": "$city"}]`, `[{"_id": "x", "count": 2}]`, 0},
		{"sortByCount order", `[{"_id": 1, "k": "a"}, {"_id": 2, "k": "b"}, {"_id": 3, "k": "b"}]`, `[{"$sortByCount": "$k"}]`,
			`[{"_id": "b", "count": 2}, {"_id": "a", "count": 1}]`, 0},
		{"redact", `[{"_id": 1, "level": 1, "pub": "ok", "secret": {"level": 5, "x": 1}, "list": [{"level": 1, "y": 1}, {"level": 9, "y": 2}, 3]}]`,
			`[{"$redact": {"$cond": [{"$lte": [{"$ifNull": ["$level", 0]}, 3]}, "$$DESCEND", "$$PRUNE"]}}]`,
			`[{"_id": 1, "level": 1, "pub": "ok", "list": [{"level": 1, "y": 1}, 3]}]`, 0},
		{"redact keep and prune top", `[{"_id": 1, "k": true}, {"_id": 2, "k": false}]`,
			`[{"$redact": {"$cond": ["$k", "$$KEEP", "$$PRUNE"]}}]`, `[{"_id": 1, "k": true}]`, 0},
		{"redact bad result", people, `[{"$redact": 1}]`, ``, 17053},
		{"unknown stage", people, `[{"$bogus": 1}]`, ``, 40324},
		{"lookup unsupported", people, `[{"$lookup": {}}]`, ``, 9000001},
		{"facet unsupported", people, `[{"$facet": {}}]`, ``, 9000001},
		{"two-field stage", people, `[{"$match": {}, "$limit": 1}]`, ``, 40323},
		{"non-document stage", people, `[1]`, ``, 14},
		{"expression error at run time", people, `[{"$project": {"x": {"$foo": 1}}}]`, ``, 168},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			input := qbDocs(t, tc.input)
			inputCopy := qbDocs(t, tc.input)
			p, err := CompilePipeline(qbVal(t, tc.pipeline).(bson.A))
			var out []bson.D
			if err == nil {
				out, err = p.Run(input, qbEnv())
			}
			for i := range input {
				if !identical(input[i], inputCopy[i]) {
					t.Fatalf("input mutated: %s", qbJSON(input[i]))
				}
			}
			if tc.code != 0 {
				if qbCode(err) != tc.code {
					t.Fatalf("want error %d, got %v", tc.code, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := qbDocs(t, tc.want)
			if len(out) != len(want) {
				t.Fatalf("got %d docs, want %d: %s", len(out), len(want), qbJSON(out))
			}
			for i := range want {
				if !identical(out[i], want[i]) {
					t.Fatalf("doc %d\n got: %s\nwant: %s", i, qbJSON(out[i]), qbJSON(want[i]))
				}
			}
		})
	}
}

func TestQueryPipelinePerDocument(t *testing.T) {
	event := qbDoc(t, `{"_id": {"_data": "82"}, "operationType": "insert", "fullDocument": {"_id": 1, "x": 5}, "ns": {"db": "d", "coll": "c"}}`)
	p, err := CompilePipeline(qbVal(t, `[{"$match": {"operationType": "insert", "fullDocument.x": {"$gt": 1}}}, {"$project": {"fullDocument.x": 1, "operationType": 1}}, {"$addFields": {"tag": "t"}}]`).(bson.A))
	if err != nil {
		t.Fatal(err)
	}
	if !p.PerDocument() {
		t.Fatal("PerDocument = false for $match/$project/$addFields")
	}
	out, keep, err := p.Apply(event, nil)
	if err != nil || !keep {
		t.Fatalf("Apply: keep=%v err=%v", keep, err)
	}
	want := qbDoc(t, `{"_id": {"_data": "82"}, "operationType": "insert", "fullDocument": {"x": 5}, "tag": "t"}`)
	if !identical(out, want) {
		t.Fatalf("Apply = %s, want %s", qbJSON(out), qbJSON(want))
	}
	event2 := qbDoc(t, `{"_id": {"_data": "83"}, "operationType": "delete"}`)
	if _, keep, err := p.Apply(event2, nil); err != nil || keep {
		t.Fatalf("Apply on non-matching event: keep=%v err=%v", keep, err)
	}
	for _, s := range []string{`[{"$group": {"_id": 1}}]`, `[{"$sort": {"a": 1}}]`, `[{"$limit": 1}]`, `[{"$unwind": "$a"}]`, `[{"$count": "n"}]`} {
		p, err := CompilePipeline(qbVal(t, s).(bson.A))
		if err != nil {
			t.Fatal(err)
		}
		if p.PerDocument() {
			t.Errorf("PerDocument = true for %s", s)
		}
		if _, _, err := p.Apply(event, nil); err == nil {
			t.Errorf("Apply accepted %s", s)
		}
	}
	for _, s := range []string{`[]`, `[{"$replaceRoot": {"newRoot": "$ns"}}, {"$unset": "db"}, {"$set": {"a": 1}}, {"$replaceWith": "$$ROOT"}, {"$redact": "$$KEEP"}]`} {
		p, err := CompilePipeline(qbVal(t, s).(bson.A))
		if err != nil {
			t.Fatal(err)
		}
		if !p.PerDocument() {
			t.Errorf("PerDocument = false for %s", s)
		}
	}
}
