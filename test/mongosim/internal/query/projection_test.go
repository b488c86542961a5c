package query

import (
	"strings"
	"testing"
)

func TestQueryProject(t *testing.T) {
	const doc = `{"_id":1,"a":1,"b":{"c":2,"d":3},"arr":[{"x":1,"y":2},{"x":3},5,[{"x":4,"y":5}]],"n":[1,2,3,4,5],"s":"str"}`
	cases := []struct{ spec, doc, want string }{
		{`{}`, doc, doc},
		{`{"a":1}`, doc, `{"_id":1,"a":1}`},
		{`{"a":true,"_id":0}`, doc, `{"a":1}`},
		{`{"a":5}`, doc, `{"_id":1,"a":1}`},
		{`{"_id":1}`, doc, `{"_id":1}`},
		{`{"_id":0}`, `{"_id":1,"a":1}`, `{"a":1}`},
		{`{"s":1,"a":1}`, doc, `{"_id":1,"a":1,"s":"str"}`}, // document order, not spec order
		{`{"b.c":1}`, doc, `{"_id":1,"b":{"c":2}}`},
		{`{"b":{"c":1}}`, doc, `{"_id":1,"b":{"c":2}}`},
		{`{"arr.x":1}`, doc, `{"_id":1,"arr":[{"x":1},{"x":3},[{"x":4}]]}`},
		{`{"a.z":1}`, doc, `{"_id":1}`},
		{`{"missing":1}`, doc, `{"_id":1}`},
		{`{"a":0}`, doc, `{"_id":1,"b":{"c":2,"d":3},"arr":[{"x":1,"y":2},{"x":3},5,[{"x":4,"y":5}]],"n":[1,2,3,4,5],"s":"str"}`},
		{`{"b.c":0,"arr":0,"n":0,"_id":0}`, doc, `{"a":1,"b":{"d":3},"s":"str"}`},
		{`{"arr.y":0,"b":0,"n":0}`, doc, `{"_id":1,"a":1,"arr":[{"x":1},{"x":3},5,[{"x":4}]],"s":"str"}`},
		{`{"_id":1,"a":0}`, `{"_id":1,"a":1,"c":2}`, `{"_id":1,"c":2}`},
		{`{"n":{"$slice":2}}`, `{"_id":1,"n":[1,2,3],"z":0}`, `{"_id":1,"n":[1,2],"z":0}`},
		{`{"n":{"$slice":-2}}`, `{"n":[1,2,3]}`, `{"n":[2,3]}`},
		{`{"n":{"$slice":10}}`, `{"n":[1,2,3]}`, `{"n":[1,2,3]}`},
		{`{"n":{"$slice":-10}}`, `{"n":[1,2,3]}`, `{"n":[1,2,3]}`},
		{`{"n":{"$slice":[1,2]}}`, `{"n":[1,2,3,4]}`, `{"n":[2,3]}`},
		{`{"n":{"$slice":[-3,2]}}`, `{"n":[1,2,3,4]}`, `{"n":[2,3]}`},
		{`{"n":{"$slice":[9,2]}}`, `{"n":[1,2,3,4]}`, `{"n":[]}`},
		{`{"n":{"$slice":1}}`, `{"n":"notarray"}`, `{"n":"notarray"}`},
		{`{"n":{"$slice":1},"a":1}`, `{"_id":7,"n":[1,2],"a":1,"b":2}`, `{"_id":7,"n":[1],"a":1}`},
		{`{"n":{"$slice":1},"a":0}`, `{"_id":7,"n":[1,2],"a":1,"b":2}`, `{"_id":7,"n":[1],"b":2}`},
		{`{"b.arr":{"$slice":1}}`, `{"b":[{"arr":[1,2]},{"arr":[3,4]}]}`, `{"b":[{"arr":[1]},{"arr":[3]}]}`},
		{`{"arr":{"$elemMatch":{"x":3}}}`, doc, `{"_id":1,"arr":[{"x":3}]}`},
		{`{"arr":{"$elemMatch":{"x":{"$gte":1}}},"a":1}`, doc, `{"_id":1,"a":1,"arr":[{"x":1,"y":2}]}`},
		{`{"arr":{"$elemMatch":{"x":99}}}`, doc, `{"_id":1}`},
		{`{"n":{"$elemMatch":{"$gt":3}}}`, doc, `{"_id":1,"n":[4]}`},
		{`{"s":{"$elemMatch":{"$gt":3}}}`, doc, `{"_id":1}`},
		{`{"c":"$b.c"}`, doc, `{"_id":1,"c":2}`},
		{`{"c":"$nosuch"}`, doc, `{"_id":1}`},
		{`{"lit":"text","a":1}`, doc, `{"_id":1,"a":1,"lit":"text"}`},
		{`{"sum":{"$add":["$a","$b.d"]}}`, doc, `{"_id":1,"sum":4}`},
		{`{"lit":{"$literal":1}}`, doc, `{"_id":1,"lit":1}`},
		{`{"b.e":"$a","b.c":1}`, doc, `{"_id":1,"b":{"c":2,"e":1}}`},
		{`{"new.x":"$a"}`, doc, `{"_id":1,"new":{"x":1}}`},
		{`{"_id":0,"arr.z":{"$literal":0}}`, `{"arr":[{"x":1},2]}`, `{"arr":[{"z":0},{"z":0}]}`},
	}
	for _, c := range cases {
		got, err := Project(qaDoc(t, c.doc), qaDoc(t, c.spec), nil)
		if err != nil {
			t.Errorf("Project(%s): %v", c.spec, err)
			continue
		}
		want := qaDoc(t, c.want)
		if HashKey(got) != HashKey(want) {
			t.Errorf("Project(%s)\n got %v\nwant %v", c.spec, got, want)
		}
	}
}

func TestQueryProjectDoesNotMutate(t *testing.T) {
	d := qaDoc(t, `{"_id":1,"n":[1,2,3],"b":{"c":1,"d":2}}`)
	before := HashKey(d)
	for _, spec := range []string{`{"n":{"$slice":1}}`, `{"b.c":0}`, `{"b.c":1}`, `{"x":"$b"}`} {
		if _, err := Project(d, qaDoc(t, spec), nil); err != nil {
			t.Fatal(err)
		}
	}
	if HashKey(d) != before {
		t.Errorf("input modified: %v", d)
	}
}

func TestQueryProjectErrors(t *testing.T) {
	cases := []struct {
		spec string
		code int32
		msg  string
	}{
		{`{"a":1,"b":0}`, 31254, "Cannot do exclusion on field b in inclusion projection"},
		{`{"a":0,"b":1}`, 31253, "Cannot do inclusion on field b in exclusion projection"},
		{`{"a":0,"c":"$x"}`, 31253, "Cannot do inclusion on field c"},
		{`{"a":{"$elemMatch":{"x":1}},"b":0}`, 31254, "exclusion on field b"},
		{`{"a":1,"a.b":1}`, 31249, "Path collision at a.b"},
		{`{"a.b":1,"a":1}`, 31250, "Path collision at a"},
		{`{"a.$":1}`, 2, "positional projection"},
		{`{"a":{"$meta":"textScore"}}`, 2, "$meta"},
		{`{"a.b":{"$elemMatch":{"x":1}}}`, 31275, "nested field"},
		{`{"a":{"$elemMatch":1}}`, 31274, "elemMatch"},
		{`{"a":{"$slice":[1,0]}}`, 28724, "limit must be positive"},
		{`{"a":{"$slice":"x"}}`, 28667, "$slice"},
		{`{"a":{}}`, 51270, "empty sub-projection"},
		{`{"$a":1}`, 16410, "may not start with '$'"},
		{`{"x":{"$nosuchop":1}}`, 168, "Unrecognized expression"},
	}
	for _, c := range cases {
		_, err := Project(qaDoc(t, `{"a":[1]}`), qaDoc(t, c.spec), nil)
		qe, ok := err.(*Error)
		if !ok {
			t.Errorf("Project(%s) error = %v, want *Error", c.spec, err)
			continue
		}
		if qe.Code != c.code || !strings.Contains(qe.Msg, c.msg) {
			t.Errorf("Project(%s) = {%d %q}, want %d containing %q", c.spec, qe.Code, qe.Msg, c.code, c.msg)
		}
	}
}

func TestQueryProjectDottedNullDataset(t *testing.T) {
	// {"a.b": 1, _id: 0} over documents of many shapes, as the server projects them.
	cases := [][2]string{
		{`{"a":{}}`, `{"a":{}}`},
		{`{"a":null}`, `{}`},
		{`{"a":4}`, `{}`},
		{`{}`, `{}`},
		{`{"a":{"b":null}}`, `{"a":{"b":null}}`},
		{`{"a":[[]]}`, `{"a":[[]]}`},
		{`{"a":[]}`, `{"a":[]}`},
		{`{"a":[null,null]}`, `{"a":[]}`},
		{`{"a":[{"b":3},{}]}`, `{"a":[{"b":3},{}]}`},
		{`{"a":[{"b":1,"c":2},{"c":3}]}`, `{"a":[{"b":1},{}]}`},
	}
	for _, c := range cases {
		got, err := Project(qaDoc(t, c[0]), qaDoc(t, `{"a.b":1,"_id":0}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := qaDoc(t, c[1]); HashKey(got) != HashKey(want) {
			t.Errorf("project %s = %v, want %v", c[0], got, want)
		}
	}
}
