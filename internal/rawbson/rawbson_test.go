package rawbson

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// core returns el's value as a bsoncore.Value.
func core(el Element) bsoncore.Value { return bsoncore.Value{Type: el.Type, Data: el.Value} }

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readElement reads the element at the start of src as the hot-path walks do with ElementAt, and
// returns the bytes after it.
func readElement(src []byte) (el Element, rest []byte, ok bool) {
	t, k, end, ok := ElementAt(src, 0)
	if !ok {
		return Element{}, src, false
	}
	return Element{Type: t, Key: src[1:k], Value: src[k+1 : end]}, src[end:], true
}

// TestElementAtMatchesBsoncore walks documents of every common value type with ElementAt and
// with bsoncore, and compares type, key and value of each element.
func TestElementAtMatchesBsoncore(t *testing.T) {
	doc := mustMarshal(t, bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "8266EFEDC0"}}},
		{Key: "operationType", Value: "insert"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 2}},
		{Key: "wallTime", Value: bson.DateTime(1700000000000)},
		{Key: "n", Value: int32(7)}, {Key: "l", Value: int64(8)}, {Key: "f", Value: 1.5},
		{Key: "b", Value: true}, {Key: "null", Value: nil}, {Key: "oid", Value: bson.NewObjectID()},
		{Key: "arr", Value: bson.A{1, "x"}}, {Key: "bin", Value: bson.Binary{Subtype: 4, Data: []byte{1, 2}}},
		{Key: "", Value: "empty key"}, {Key: "re", Value: bson.Regex{Pattern: "^a.*", Options: "i"}},
		{Key: "dbp", Value: bson.DBPointer{DB: "d.c", Pointer: bson.NewObjectID()}},
		{Key: "cws", Value: bson.CodeWithScope{Code: "f()", Scope: bson.D{{Key: "x", Value: 1}}}},
		{Key: "js", Value: bson.JavaScript("g()")}, {Key: "sym", Value: bson.Symbol("s")},
		{Key: "dec", Value: bson.NewDecimal128(1, 2)}, {Key: "min", Value: bson.MinKey{}},
		{Key: "max", Value: bson.MaxKey{}}, {Key: "undef", Value: bson.Undefined{}},
		{Key: "emptybin", Value: bson.Binary{Data: []byte{}}}, {Key: "emptydoc", Value: bson.D{}},
	})
	rem, ok := Elements(doc)
	if !ok {
		t.Fatal("Elements: not ok")
	}
	want, err := bsoncore.Document(doc).Elements()
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		el, next, ok := readElement(rem)
		if !ok {
			t.Fatalf("element %d (%s): not ok", i, w.Key())
		}
		if el.Type != w.Value().Type || string(el.Key) != w.Key() || !bytes.Equal(el.Value, w.Value().Data) {
			t.Errorf("element %d: got %v %q %x, want %v %q %x", i, el.Type, el.Key, el.Value, w.Value().Type, w.Key(), w.Value().Data)
		}
		rem = next
	}
	if len(rem) != 0 {
		t.Errorf("%d bytes left after the last element", len(rem))
	}
	if el, ok := Lookup(doc, "operationType"); !ok || el.Type != bsoncore.TypeString || core(el).StringValue() != "insert" {
		t.Errorf("Lookup(operationType) = %v, %v", el, ok)
	}
	if _, ok := Lookup(doc, "absent"); ok {
		t.Error("Lookup(absent) found something")
	}
}

// TestElementAtDamaged feeds truncated and corrupted input: never a panic, always not ok.
func TestElementAtDamaged(t *testing.T) {
	doc := mustMarshal(t, bson.D{{Key: "k", Value: "value"}, {Key: "d", Value: bson.D{{Key: "x", Value: 1}}}})
	rem, _ := Elements(doc)
	for n := range len(rem) {
		if n == 0 {
			continue
		}
		cut := rem[:n]
		// Every cut inside the first element must fail; a cut at an element boundary reads it.
		el, _, ok := readElement(cut)
		if ok && len(el.Key)+len(el.Value)+2 > n {
			t.Errorf("cut at %d: read past the end", n)
		}
	}
	bad := bytes.Clone(rem)
	bad[len("k")+2] = 0xff // the string's length: far past the end
	if _, _, ok := readElement(bad); ok {
		t.Error("a string longer than the input read as ok")
	}
	for _, d := range [][]byte{nil, {1, 0, 0}, {5, 0, 0, 0, 1}, {6, 0, 0, 0, 0}} {
		if _, ok := Elements(d); ok {
			t.Errorf("Elements(%x) ok", d)
		}
	}
	for _, d := range [][]byte{nil, {5, 0, 0, 0, 1}, {6, 0, 0, 0, 0, 0}, {7, 0, 0, 0, 2, 'k', 0}} {
		if _, ok := Lookup(d, "k"); ok {
			t.Errorf("Lookup(%x) ok", d)
		}
	}
	if _, _, ok := readElement([]byte{0}); ok {
		t.Error("the terminating NUL read as an element")
	}
}

// BenchmarkWalk walks a change event's top-level elements with ElementAt and with bsoncore's
// element reader, in the same run: compare the two ns/op.
func BenchmarkWalk(b *testing.B) {
	doc, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "8266EFEDC0000000012B022C0100296E5A1004"}}},
		{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 2}},
		{Key: "wallTime", Value: bson.DateTime(1700000000000)},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "i", Value: int64(7)}}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: bson.NewObjectID()}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("rawbson", func(b *testing.B) {
		for b.Loop() {
			rem, _ := Elements(doc)
			for i := 0; i < len(rem); {
				_, k, end, ok := ElementAt(rem, i)
				if !ok {
					b.Fatal("damaged")
				}
				_, _ = rem[i+1:k], rem[k+1:end]
				i = end
			}
		}
	})
	b.Run("bsoncore", func(b *testing.B) {
		for b.Loop() {
			rem, _ := Elements(doc)
			for len(rem) > 0 {
				el, next, ok := bsoncore.ReadElement(rem)
				if !ok {
					b.Fatal("damaged")
				}
				_, _ = el.KeyBytes(), el.Value()
				rem = next
			}
		}
	})
}

// TestLookupTruncated looks up a key in every truncation of a document (its length prefix
// patched to match, so only the walk can notice): never a panic, never a value past the end, and
// the element found only when it is whole.
func TestLookupTruncated(t *testing.T) {
	doc := mustMarshal(t, bson.D{{Key: "a", Value: "x"}, {Key: "d", Value: bson.D{{Key: "y", Value: 1}}},
		{Key: "re", Value: bson.Regex{Pattern: "p", Options: "i"}}, {Key: "k", Value: int64(9)}})
	whole, ok := Lookup(doc, "k")
	if !ok || core(whole).Int64() != 9 {
		t.Fatalf("Lookup(k) in the whole document = %v, %v", whole, ok)
	}
	for n := 5; n < len(doc); n++ {
		cut := bytes.Clone(doc[:n])
		cut[0], cut[1], cut[2], cut[3] = byte(n), 0, 0, 0
		cut[n-1] = 0 // a terminating NUL where the cut ends
		el, ok := Lookup(cut, "k")
		if ok && (len(el.Value) != 8 || core(el).Int64() != 9) {
			t.Errorf("cut at %d: found a damaged k: %x", n, el.Value)
		}
	}
}
