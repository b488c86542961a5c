package stream

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestScanEnvelope(t *testing.T) {
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "82AB"}}},
		{Key: "operationType", Value: "insert"},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}, {Key: "operationType", Value: "nested"}}},
		{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: 1}, {Key: "of", Value: 2}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := scanEnvelope(raw, true)
	if want := bson.Raw(raw).Lookup("_id").Value; string(env.id) != string(want) {
		t.Errorf("id = %x, want %x", env.id, want)
	}
	if string(env.op) != "insert" {
		t.Errorf("op = %q, want insert", env.op)
	}
	if !env.hasSplit {
		t.Fatal("splitEvent not found")
	}
	if f, of, err := splitInfo(env.split); err != nil || f != 1 || of != 2 {
		t.Errorf("splitInfo = %d, %d, %v; want 1, 2, nil", f, of, err)
	}

	whole, _ := bson.Marshal(bson.D{{Key: "operationType", Value: 7}})
	env = scanEnvelope(whole, true)
	if env.id != nil || env.op != nil || env.hasSplit {
		t.Errorf("no _id, a non-string operationType, no splitEvent: got %+v", env)
	}
	for _, bad := range [][]byte{nil, {1, 0}, raw[:len(raw)/2]} {
		_ = scanEnvelope(bad, true) // truncated input: no panic
	}
	if testing.AllocsPerRun(100, func() { _ = scanEnvelope(raw, true) }) != 0 {
		t.Error("scanEnvelope allocates")
	}
}

// TestScanEnvelopeWithoutSplits: on a cursor that never splits, the walk stops at _id and
// operationType, and a splitEvent field (a user's own) is not taken for a fragment.
func TestScanEnvelopeWithoutSplits(t *testing.T) {
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "82AB"}}},
		{Key: "operationType", Value: "insert"},
		{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: 1}, {Key: "of", Value: 2}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := scanEnvelope(raw, false)
	if string(env.op) != "insert" || env.id == nil || env.hasSplit {
		t.Errorf("got op %q id %x hasSplit %v; want insert, the _id, no split", env.op, env.id, env.hasSplit)
	}
	late, _ := bson.Marshal(bson.D{{Key: "ns", Value: bson.D{{Key: "db", Value: "d"}}}, {Key: "operationType", Value: "drop"},
		{Key: "x", Value: 1}, {Key: "_id", Value: bson.D{{Key: "_data", Value: "82CD"}}}})
	if env := scanEnvelope(late, false); string(env.op) != "drop" || env.id == nil {
		t.Errorf("fields in another order: got op %q id %x", env.op, env.id)
	}
}
