package stream

import (
	"bytes"
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
	env := scanEnvelope(raw)
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
	env = scanEnvelope(whole)
	if env.id != nil || env.op != nil || env.hasSplit {
		t.Errorf("no _id, a non-string operationType, no splitEvent: got %+v", env)
	}
	for _, bad := range [][]byte{nil, {1, 0}, raw[:len(raw)/2]} {
		_ = scanEnvelope(bad) // truncated input: no panic
	}
	if testing.AllocsPerRun(100, func() { _ = scanEnvelope(raw) }) != 0 {
		t.Error("scanEnvelope allocates")
	}
}

func TestEventCopier(t *testing.T) {
	var c eventCopier
	a := c.copy([]byte("first"))
	b := c.copy([]byte("second"))
	if string(a) != "first" || string(b) != "second" {
		t.Fatalf("copies %q %q", a, b)
	}
	if cap(a) != len(a) {
		t.Errorf("cap %d != len %d: an append would write over the next event", cap(a), len(a))
	}
	_ = append(a, "XXXXXX"...)
	if string(b) != "second" {
		t.Errorf("an append to one copy changed the next: %q", b)
	}
	src := []byte("mutated later")
	d := c.copy(src)
	src[0] = 'X'
	if string(d) != "mutated later" {
		t.Errorf("the copy shares the source: %q", d)
	}
	big := make([]byte, copyChunk/4+1)
	if got := c.copy(big); len(got) != len(big) || &got[0] == &big[0] {
		t.Error("a large event is not copied on its own")
	}
	// Filling a block moves on to a new one without touching earlier copies.
	ev := bytes.Repeat([]byte{7}, 1000)
	var copies [][]byte
	for range 3 * copyChunk / len(ev) {
		copies = append(copies, c.copy(ev))
	}
	for i, cp := range copies {
		if !bytes.Equal(cp, ev) {
			t.Fatalf("copy %d changed", i)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { _ = c.copy(ev) }); n > 0.1 {
		t.Errorf("%v allocations per copy of a 1 KB event, want about 1/64", n)
	}
}
