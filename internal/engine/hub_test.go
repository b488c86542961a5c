package engine

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func marshalStage(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSharedReason: a Shared Collection stream shares unless its pipeline has a stage other
// than $match; the option class keys the pipeline's stages, which split back as they were.
func TestSharedReason(t *testing.T) {
	match := marshalStage(t, bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}})
	add := marshalStage(t, bson.D{{Key: "$addFields", Value: bson.D{{Key: "x", Value: 1}}}})
	tests := []struct {
		name string
		spec Spec
		want bool // shares
	}{
		{"dedicated", Spec{Collection: "c"}, true},
		{"no pipeline", Spec{Collection: "c", Shared: true}, true},
		{"$match only", Spec{Collection: "c", Shared: true, Pipeline: []bson.Raw{match, match}}, true},
		{"$addFields", Spec{Collection: "c", Shared: true, Pipeline: []bson.Raw{match, add}}, false},
		{"database-wide", Spec{Database: "d", Shared: true}, false},
	}
	for _, tt := range tests {
		if got := sharedReason(&tt.spec) == ""; got != tt.want {
			t.Errorf("%s: shares %v (reason %q), want %v", tt.name, got, sharedReason(&tt.spec), tt.want)
		}
	}
	a := Spec{Collection: "a", Pipeline: []bson.Raw{match}}
	b := Spec{Collection: "b", Pipeline: []bson.Raw{match}}
	c := Spec{Collection: "b", Pipeline: []bson.Raw{match}, FullDocument: "updateLookup"}
	if keyOf(&a, nil, "d") != keyOf(&b, nil, "d") {
		t.Error("same database, pipeline and options: different hubs")
	}
	if keyOf(&a, nil, "d") == keyOf(&c, nil, "d") || keyOf(&a, nil, "d") == keyOf(&a, nil, "e") {
		t.Error("another option class or database: the same hub")
	}
	got := splitPipeline(keyOf(&Spec{Pipeline: []bson.Raw{match, add}}, nil, "d").pipeline)
	if len(got) != 2 || string(got[0]) != string(match) || string(got[1]) != string(add) {
		t.Errorf("splitPipeline: %v", got)
	}
}
