package dispatcher

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func TestLaneKey(t *testing.T) {
	mustRaw := func(d bson.D) []byte {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := mustRaw(bson.D{{Key: "_id", Value: int32(7)}, {Key: "region", Value: "eu"}})
	ev := mustRaw(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: "update"},
		{Key: "fullDocument", Value: bson.D{{Key: "documentKey", Value: "not this one"}}},
		{Key: "documentKey", Value: bson.Raw(key)}})
	if got, ok := laneKey(ev); !ok || !bytes.Equal(got, key) {
		t.Fatalf("laneKey = %x, %v; want the documentKey document %x", got, ok, key)
	}
	for name, raw := range map[string][]byte{
		"no documentKey (drop)":      mustRaw(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: "drop"}}),
		"documentKey not a document": mustRaw(bson.D{{Key: "documentKey", Value: "x"}}),
		"truncated event":            ev[:len(ev)-len(key)/2],
		"empty":                      nil,
	} {
		if got, ok := laneKey(raw); ok {
			t.Errorf("%s: laneKey = %x, true; want no key (a barrier)", name, got)
		}
	}
}

func TestLaneKeyAllocatesNothing(t *testing.T) {
	ev, err := bson.Marshal(bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = laneKey(ev) }); n != 0 {
		t.Fatalf("laneKey allocates %.0f times per event, want 0", n)
	}
}

// BenchmarkLaneKey finds the documentKey of a typical insert event (it follows the full
// document) with laneKey and with bsoncore's lookup, in the same run.
func BenchmarkLaneKey(b *testing.B) {
	ev, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "8266EFEDC0000000012B022C0100296E5A1004"}}},
		{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 2}},
		{Key: "wallTime", Value: bson.DateTime(1700000000000)},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: int32(7)}, {Key: "status", Value: "new"}, {Key: "total", Value: 12.5}}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(7)}}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("laneKey", func(b *testing.B) {
		for b.Loop() {
			if _, ok := laneKey(ev); !ok {
				b.Fatal("no key")
			}
		}
	})
	b.Run("bsoncore", func(b *testing.B) {
		for b.Loop() {
			if _, err := bsoncore.Document(ev).LookupErr("documentKey"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
