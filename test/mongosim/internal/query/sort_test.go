package query

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// qaIDs returns the "id" field of each document, in order.
func qaIDs(docs []bson.D) []string {
	var out []string
	for _, d := range docs {
		v, _ := lookupField(d, "id")
		out = append(out, v.(string))
	}
	return out
}

func TestQuerySortDocs(t *testing.T) {
	cases := []struct {
		spec string
		docs []string // each has a unique "id"
		want string   // ids in sorted order, comma-separated
	}{
		{`{"a":1}`, []string{`{"id":"x","a":3}`, `{"id":"y","a":1}`, `{"id":"z","a":2}`}, "y,z,x"},
		{`{"a":-1}`, []string{`{"id":"x","a":3}`, `{"id":"y","a":1}`, `{"id":"z","a":2}`}, "x,z,y"},
		{`{"a":1}`, []string{`{"id":"x","a":2.5}`, `{"id":"y","a":{"$numberLong":"2"}}`, `{"id":"z","a":{"$numberDecimal":"3"}}`}, "y,x,z"},
		// Stability: equal keys keep input order, both directions.
		{`{"a":1}`, []string{`{"id":"p","a":1}`, `{"id":"q","a":1.0}`, `{"id":"r","a":0}`, `{"id":"s","a":1}`}, "r,p,q,s"},
		{`{"a":-1}`, []string{`{"id":"p","a":1}`, `{"id":"q","a":1.0}`, `{"id":"r","a":0}`, `{"id":"s","a":1}`}, "p,q,s,r"},
		// Cross-type order: missing == null < numbers < strings < objects < arrays' elements...
		{`{"a":1}`, []string{`{"id":"s","a":"x"}`, `{"id":"n","a":5}`, `{"id":"m"}`, `{"id":"u","a":null}`, `{"id":"o","a":{"b":1}}`, `{"id":"b","a":true}`, `{"id":"k","a":{"$minKey":1}}`}, "k,m,u,n,s,o,b"},
		// Multi-key.
		{`{"a":1,"b":-1}`, []string{`{"id":"1","a":1,"b":1}`, `{"id":"2","a":1,"b":2}`, `{"id":"3","a":0,"b":0}`}, "3,2,1"},
		// Arrays: min ascending, max descending.
		{`{"a":1}`, []string{`{"id":"x","a":[5,1]}`, `{"id":"y","a":2}`, `{"id":"z","a":[3,4]}`}, "x,y,z"},
		{`{"a":-1}`, []string{`{"id":"x","a":[5,1]}`, `{"id":"y","a":2}`, `{"id":"z","a":[3,4]}`}, "x,z,y"},
		{`{"a":1}`, []string{`{"id":"x","a":[]}`, `{"id":"y","a":null}`, `{"id":"z","a":[0]}`}, "x,y,z"},
		// Dotted paths fan out through arrays of documents; a missing sub-field counts as null.
		{`{"a.b":1}`, []string{`{"id":"x","a":[{"b":9},{"b":2}]}`, `{"id":"y","a":{"b":3}}`, `{"id":"z","a":[{"b":5},{"c":1}]}`}, "z,x,y"},
		{`{"a.b":-1}`, []string{`{"id":"x","a":[{"b":9},{"b":2}]}`, `{"id":"y","a":{"b":3}}`, `{"id":"z","a":[{"b":5},{"c":1}]}`}, "x,z,y"},
		{`{"a.1":1}`, []string{`{"id":"x","a":[0,9]}`, `{"id":"y","a":[9,1]}`}, "y,x"},
		{`{}`, []string{`{"id":"x","a":2}`, `{"id":"y","a":1}`}, "x,y"},
		{`{"$natural":1}`, []string{`{"id":"x","a":2}`, `{"id":"y","a":1}`, `{"id":"z"}`}, "x,y,z"},
		{`{"$natural":-1}`, []string{`{"id":"x","a":2}`, `{"id":"y","a":1}`, `{"id":"z"}`}, "z,y,x"},
	}
	for _, c := range cases {
		var docs []bson.D
		for _, s := range c.docs {
			docs = append(docs, qaDoc(t, s))
		}
		if err := SortDocs(docs, qaDoc(t, c.spec)); err != nil {
			t.Errorf("SortDocs(%s): %v", c.spec, err)
			continue
		}
		if got := strings.Join(qaIDs(docs), ","); got != c.want {
			t.Errorf("SortDocs(%s) = %s, want %s", c.spec, got, c.want)
		}
	}
}

func TestQuerySortErrors(t *testing.T) {
	for _, spec := range []string{`{"a":2}`, `{"a":0}`, `{"a":"x"}`, `{"a":{"$meta":"textScore"}}`, `{"a":{"b":1}}`, `{"$a":1}`, `{"":1}`, `{"$natural":1,"a":1}`, `{"$natural":2}`} {
		docs := []bson.D{qaDoc(t, `{"a":2}`), qaDoc(t, `{"a":1}`)}
		err := SortDocs(docs, qaDoc(t, spec))
		if _, ok := err.(*Error); !ok {
			t.Errorf("SortDocs(%s) error = %v, want *Error", spec, err)
		}
		if v, _ := lookupField(docs[0], "a"); v != int32(2) {
			t.Errorf("SortDocs(%s) reordered docs despite the error", spec)
		}
	}
	if err := SortDocs(nil, qaDoc(t, `{"a":-1.0}`)); err != nil {
		t.Errorf("-1.0 must be accepted: %v", err)
	}
}
