package query

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestQueryGetPath(t *testing.T) {
	doc := qaDoc(t, `{"a":{"b":[10,{"c":"x"},[7]]},"d":null,"e":{"0":"zero"},"arr":[{"k":1},{"k":2}]}`)
	cases := []struct {
		path string
		want any
		ok   bool
	}{
		{"a.b.0", int32(10), true},
		{"a.b.1.c", "x", true},
		{"a.b.2.0", int32(7), true},
		{"a.b.3", nil, false},
		{"a.b.c", nil, false}, // no fan-out
		{"arr.k", nil, false},
		{"arr.1.k", int32(2), true},
		{"d", nil, true},
		{"d.x", nil, false},
		{"e.0", "zero", true},
		{"a.b.01", nil, false},
		{"a.b.-1", nil, false},
		{"zz", nil, false},
	}
	for _, c := range cases {
		got, ok := GetPath(doc, c.path)
		if ok != c.ok || ok && !Equal(got, c.want) {
			t.Errorf("GetPath(%q) = %v, %v; want %v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
	if v, ok := GetPath(doc, "a"); !ok || TypeOrder(v) != orderObject {
		t.Errorf("GetPath(a) = %v, %v", v, ok)
	}
}

func TestQueryLookupAll(t *testing.T) {
	cases := []struct {
		doc, path string
		want      string // ext JSON array of expected values
	}{
		{`{"a":1}`, "a", `[1]`},
		{`{"a":[1,2]}`, "a", `[[1,2]]`},
		{`{"b":1}`, "a", `[]`},
		{`{"a":null}`, "a", `[null]`},
		{`{"a":{"b":{"c":3}}}`, "a.b.c", `[3]`},
		{`{"a":[{"b":1},{"b":[2,3]},{"c":4},5]}`, "a.b", `[1,[2,3]]`},
		{`{"a":[{"b":[{"c":1},{"c":2}]},{"b":{"c":3}}]}`, "a.b.c", `[1,2,3]`},
		{`{"a":[[{"b":1}]]}`, "a.b", `[]`},
		{`{"a":[10,20]}`, "a.1", `[20]`},
		{`{"a":[{"b":1},{"b":2}]}`, "a.1.b", `[2]`},
		{`{"a":[{"1":"f"},{"b":2}]}`, "a.1", `["f",{"b":2}]`},
		{`{"a":5}`, "a.b", `[]`},
	}
	for _, c := range cases {
		got := LookupAll(qaDoc(t, c.doc), c.path)
		want := qaVal(t, c.want).(bson.A)
		if !Equal(bson.A(got), want) {
			t.Errorf("LookupAll(%s, %q) = %v, want %v", c.doc, c.path, got, want)
		}
	}
}
