package sink

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree"
)

// sameAsDriver encodes doc with both encoders and fails unless they agree: both refuse it, or
// both return the same bytes. It returns the driver's output.
func sameAsDriver(t testing.TB, doc []byte) []byte {
	t.Helper()
	want, werr := bson.MarshalExtJSON(bson.Raw(doc), true, false)
	got, gerr := marshalExtJSON(doc)
	switch {
	case werr != nil && gerr == nil:
		t.Fatalf("% x: the driver refuses it (%v), ours returned %s", doc, werr, got)
	case werr == nil && gerr != nil:
		t.Fatalf("% x: ours refuses it (%v), the driver returned %s", doc, gerr, want)
	case werr == nil && !bytes.Equal(got, want):
		t.Fatalf("% x:\n got %s\nwant %s", doc, got, want)
	}
	return want
}

func marshal(t testing.TB, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// elem builds a one-element document of type typ whose value is the bytes val, so that tests
// can write values bson.Marshal would not produce.
func elem(typ byte, val []byte) []byte {
	e := append([]byte{typ, 'v', 0}, val...)
	doc := binary.LittleEndian.AppendUint32(nil, uint32(4+len(e)+1))
	return append(append(doc, e...), 0)
}

func le32(n int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(n)) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func dec(t *testing.T, s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestExtJSONTable pins the output for every BSON type and its edge values: each case's exact
// text, and that it is the driver's.
func TestExtJSONTable(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("5f1d7a3b9c0e4a2b8d6f0a1c")
	nan := math.Float64frombits(0x7ff8000000000001)
	cases := []struct {
		name string
		doc  []byte
		want string
	}{
		{"empty", marshal(t, bson.D{}), `{}`},
		{"double", marshal(t, bson.D{{Key: "a", Value: 1.5}}), `{"a":{"$numberDouble":"1.5"}}`},
		{"double integral", marshal(t, bson.D{{Key: "a", Value: 3.0}}), `{"a":{"$numberDouble":"3.0"}}`},
		{"double -0", marshal(t, bson.D{{Key: "a", Value: math.Copysign(0, -1)}}), `{"a":{"$numberDouble":"-0.0"}}`},
		{"double exponent", marshal(t, bson.D{{Key: "a", Value: 1e21}, {Key: "b", Value: 1.5e-7}, {Key: "c", Value: 1e20}, {Key: "d", Value: 100000.0}, {Key: "e", Value: 1e6}}),
			`{"a":{"$numberDouble":"1E+21"},"b":{"$numberDouble":"1.5E-07"},"c":{"$numberDouble":"1E+20"},"d":{"$numberDouble":"100000.0"},"e":{"$numberDouble":"1E+06"}}`},
		{"double extremes", marshal(t, bson.D{{Key: "a", Value: math.MaxFloat64}, {Key: "b", Value: math.SmallestNonzeroFloat64}}),
			`{"a":{"$numberDouble":"1.7976931348623157E+308"},"b":{"$numberDouble":"5E-324"}}`},
		{"double NaN Inf", marshal(t, bson.D{{Key: "n", Value: nan}, {Key: "p", Value: math.Inf(1)}, {Key: "m", Value: math.Inf(-1)}}),
			`{"n":{"$numberDouble":"NaN"},"p":{"$numberDouble":"Infinity"},"m":{"$numberDouble":"-Infinity"}}`},
		{"string escapes", marshal(t, bson.D{{Key: "s", Value: "q\"b\\n\nr\rt\tb\bf\f\x01\x1f\x7f<>&/"}}),
			`{"s":"q\"b\\n\nr\rt\tb\bf\f\u0001\u001f` + "\x7f" + `<>&/"}`},
		{"string utf8", marshal(t, bson.D{{Key: "s", Value: "é漢😀\u2028\u2029\ufffd"}}), `{"s":"é漢😀\u2028\u2029` + "\ufffd" + `"}`},
		{"string invalid utf8", marshal(t, bson.D{{Key: "s", Value: "a\xffb\xc3\xed\xa0\x80"}}), `{"s":"a\ufffdb\ufffd\ufffd\ufffd\ufffd"}`},
		{"string inner NUL", elem(0x02, cat(le32(4), []byte("a\x00b\x00"))), `{"v":"a\u0000b"}`},
		{"key escapes", marshal(t, bson.D{{Key: "k\"\n\xff\u2028", Value: int32(1)}}), `{"k\"\n\ufffd\u2028":{"$numberInt":"1"}}`},
		{"document", marshal(t, bson.D{{Key: "d", Value: bson.D{{Key: "x", Value: bson.D{}}, {Key: "y", Value: bson.A{}}}}}), `{"d":{"x":{},"y":[]}}`},
		{"array", marshal(t, bson.D{{Key: "a", Value: bson.A{int32(1), "two", bson.A{nil}, bson.D{{Key: "k", Value: true}}}}}),
			`{"a":[{"$numberInt":"1"},"two",[null],{"k":true}]}`},
		{"binary subtypes", marshal(t, bson.D{
			{Key: "b0", Value: bson.Binary{Subtype: 0x00, Data: []byte("hi!")}},
			{Key: "b1", Value: bson.Binary{Subtype: 0x01, Data: []byte{}}},
			{Key: "b3", Value: bson.Binary{Subtype: 0x03, Data: bytes.Repeat([]byte{0xAB}, 16)}},
			{Key: "b4", Value: bson.Binary{Subtype: 0x04, Data: bytes.Repeat([]byte{0x01}, 16)}},
			{Key: "b5", Value: bson.Binary{Subtype: 0x05, Data: []byte{1, 2}}},
			{Key: "b6", Value: bson.Binary{Subtype: 0x06, Data: []byte{3}}},
			{Key: "b7", Value: bson.Binary{Subtype: 0x07, Data: []byte{4}}},
			{Key: "b8", Value: bson.Binary{Subtype: 0x08, Data: []byte{5}}},
			{Key: "b9", Value: bson.Binary{Subtype: 0x09, Data: []byte{0x03, 0x00, 1, 2}}},
			{Key: "b80", Value: bson.Binary{Subtype: 0x80, Data: []byte{0xff}}},
			{Key: "bff", Value: bson.Binary{Subtype: 0xff, Data: []byte("a")}},
		}), `{"b0":{"$binary":{"base64":"aGkh","subType":"00"}},"b1":{"$binary":{"base64":"","subType":"01"}},` +
			`"b3":{"$binary":{"base64":"q6urq6urq6urq6urq6urqw==","subType":"03"}},"b4":{"$binary":{"base64":"AQEBAQEBAQEBAQEBAQEBAQ==","subType":"04"}},` +
			`"b5":{"$binary":{"base64":"AQI=","subType":"05"}},"b6":{"$binary":{"base64":"Aw==","subType":"06"}},` +
			`"b7":{"$binary":{"base64":"BA==","subType":"07"}},"b8":{"$binary":{"base64":"BQ==","subType":"08"}},` +
			`"b9":{"$binary":{"base64":"AwABAg==","subType":"09"}},"b80":{"$binary":{"base64":"/w==","subType":"80"}},` +
			`"bff":{"$binary":{"base64":"YQ==","subType":"ff"}}}`},
		// The old binary subtype 0x02 carries an inner length; the driver reads the bytes it names.
		{"binary old subtype 2", elem(0x05, cat(le32(7), []byte{0x02}, le32(3), []byte("abc"))), `{"v":{"$binary":{"base64":"YWJj","subType":"02"}}}`},
		{"binary old subtype 2 short", elem(0x05, cat(le32(2), []byte{0x02}, []byte("ab"))), `{"v":{"$binary":{"base64":"YWI=","subType":"02"}}}`},
		{"undefined", marshal(t, bson.D{{Key: "u", Value: bson.Undefined{}}}), `{"u":{"$undefined":true}}`},
		{"objectid", marshal(t, bson.D{{Key: "_id", Value: oid}}), `{"_id":{"$oid":"5f1d7a3b9c0e4a2b8d6f0a1c"}}`},
		{"bool", marshal(t, bson.D{{Key: "t", Value: true}, {Key: "f", Value: false}}), `{"t":true,"f":false}`},
		{"datetime", marshal(t, bson.D{{Key: "d", Value: bson.DateTime(1700000000123)}, {Key: "neg", Value: bson.DateTime(-1)},
			{Key: "max", Value: bson.DateTime(math.MaxInt64)}, {Key: "min", Value: bson.DateTime(math.MinInt64)}}),
			`{"d":{"$date":{"$numberLong":"1700000000123"}},"neg":{"$date":{"$numberLong":"-1"}},` +
				`"max":{"$date":{"$numberLong":"9223372036854775807"}},"min":{"$date":{"$numberLong":"-9223372036854775808"}}}`},
		{"null", marshal(t, bson.D{{Key: "n", Value: nil}}), `{"n":null}`},
		{"regex options sorted", marshal(t, bson.D{{Key: "r", Value: bson.Regex{Pattern: `^a"\d+$`, Options: "xsmi"}}}),
			`{"r":{"$regularExpression":{"pattern":"^a\"\\d+$","options":"imsx"}}}`},
		{"regex options non-ASCII", elem(0x0B, []byte("p\x00z\xffé\x01a\x00")), `{"v":{"$regularExpression":{"pattern":"p","options":"\u0001azé` + "\ufffd" + `"}}}`},
		{"dbpointer", marshal(t, bson.D{{Key: "p", Value: bson.DBPointer{DB: "db.c\"x", Pointer: oid}}}),
			`{"p":{"$dbPointer":{"$ref":"db.c"x","$id":{"$oid":"5f1d7a3b9c0e4a2b8d6f0a1c"}}}}`},
		{"javascript", marshal(t, bson.D{{Key: "j", Value: bson.JavaScript("f(\"x\")\n")}}), `{"j":{"$code":"f(\"x\")\n"}}`},
		{"symbol", marshal(t, bson.D{{Key: "s", Value: bson.Symbol("sym\t")}}), `{"s":{"$symbol":"sym\t"}}`},
		{"code with scope", marshal(t, bson.D{{Key: "c", Value: bson.CodeWithScope{Code: "x+y", Scope: bson.D{{Key: "x", Value: int32(1)}, {Key: "y", Value: bson.A{"z"}}}}}}),
			`{"c":{"$code":"x+y","$scope":{"x":{"$numberInt":"1"},"y":["z"]}}}`},
		{"code with empty scope", marshal(t, bson.D{{Key: "c", Value: bson.CodeWithScope{Code: "", Scope: bson.D{}}}}), `{"c":{"$code":"","$scope":{}}}`},
		{"int32", marshal(t, bson.D{{Key: "a", Value: int32(math.MinInt32)}, {Key: "b", Value: int32(math.MaxInt32)}, {Key: "c", Value: int32(0)}}),
			`{"a":{"$numberInt":"-2147483648"},"b":{"$numberInt":"2147483647"},"c":{"$numberInt":"0"}}`},
		{"timestamp", marshal(t, bson.D{{Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 7}}, {Key: "mx", Value: bson.Timestamp{T: math.MaxUint32, I: math.MaxUint32}}}),
			`{"ts":{"$timestamp":{"t":1700000000,"i":7}},"mx":{"$timestamp":{"t":4294967295,"i":4294967295}}}`},
		{"int64", marshal(t, bson.D{{Key: "a", Value: int64(math.MinInt64)}, {Key: "b", Value: int64(math.MaxInt64)}}),
			`{"a":{"$numberLong":"-9223372036854775808"},"b":{"$numberLong":"9223372036854775807"}}`},
		{"decimal128", marshal(t, bson.D{{Key: "a", Value: dec(t, "1.10")}, {Key: "b", Value: dec(t, "-1E+6144")}, {Key: "c", Value: dec(t, "NaN")},
			{Key: "d", Value: dec(t, "-Infinity")}, {Key: "e", Value: dec(t, "0E-6176")}, {Key: "f", Value: dec(t, "1.000000000000000000000000000000000E-6143")}}),
			`{"a":{"$numberDecimal":"1.10"},"b":{"$numberDecimal":"-1.000000000000000000000000000000000E+6144"},"c":{"$numberDecimal":"NaN"},` +
				`"d":{"$numberDecimal":"-Infinity"},"e":{"$numberDecimal":"0E-6176"},"f":{"$numberDecimal":"1.000000000000000000000000000000000E-6143"}}`},
		{"min max key", marshal(t, bson.D{{Key: "lo", Value: bson.MinKey{}}, {Key: "hi", Value: bson.MaxKey{}}}), `{"lo":{"$minKey":1},"hi":{"$maxKey":1}}`},
		// Bytes after the declared length are not part of the document; the driver ignores them.
		{"trailing bytes", append(marshal(t, bson.D{{Key: "a", Value: int32(1)}}), 0xde, 0xad), `{"a":{"$numberInt":"1"}}`},
		// An array's keys are not checked to be indexes.
		{"array odd keys", elem(0x04, cat(le32(12), []byte{0x0A, 'x', 0, 0x0A, 'y', 'z', 0, 0})), `{"v":[null,null]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := sameAsDriver(t, c.doc)
			if string(want) != c.want {
				t.Errorf("driver and ours:\n got %s\nwant %s", want, c.want)
			}
		})
	}
}

// TestExtJSONRefusesMalformed checks that ours refuses, with an error and no panic, every
// malformed document the driver refuses, including the ones bson.Raw.Validate accepts because
// it does not look inside nested values.
func TestExtJSONRefusesMalformed(t *testing.T) {
	good := marshal(t, bson.D{{Key: "a", Value: "x"}})
	cases := map[string][]byte{
		"nil":                       nil,
		"short length":              {5, 0, 0},
		"length below 5":            {4, 0, 0, 0},
		"negative length":           {0xff, 0xff, 0xff, 0xff, 0},
		"length past the end":       {9, 0, 0, 0, 0},
		"no terminator":             {5, 0, 0, 0, 1},
		"terminator early":          {6, 0, 0, 0, 0, 0},
		"truncated element":         good[:len(good)-2],
		"key unterminated":          {7, 0, 0, 0, 0x0A, 'k', 0},
		"unknown type":              elem(0x14, nil),
		"type 0x00 mid document":    cat(le32(9), []byte{0x0A, 'a', 0, 0, 0}),
		"string length 0":           elem(0x02, cat(le32(0), []byte{0})),
		"string not NUL-ended":      elem(0x02, cat(le32(2), []byte("ab"))),
		"string too long":           elem(0x02, cat(le32(50), []byte("ab\x00"))),
		"bool 2":                    elem(0x08, []byte{2}),
		"binary negative":           elem(0x05, cat(le32(-1), []byte{0})),
		"old binary inner too long": elem(0x05, cat(le32(7), []byte{0x02}, le32(9), []byte("abc"))),
		"old binary inner negative": elem(0x05, cat(le32(7), []byte{0x02}, le32(-2), []byte("abc"))),
		"nested length too short":   elem(0x03, cat(le32(4), []byte{0})),
		"nested length wrong":       elem(0x03, cat(le32(9), []byte{0x0A, 'a', 0, 0, 0})),
		"nested bad inner value":    elem(0x03, cat(le32(12), []byte{0x08, 'b', 0, 7}, []byte{0x0A, 'c', 0, 0})),
		"nested unknown type":       elem(0x04, cat(le32(8), []byte{0x20, '0', 0, 0})),
		"nested truncated":          elem(0x03, cat(le32(9), []byte{0x10, 'i', 0, 1, 0})),
		"code w/ scope sum":         elem(0x0F, cat(le32(99), le32(2), []byte("x\x00"), le32(5), []byte{0})),
		"code w/ scope code 0":      elem(0x0F, cat(le32(13), le32(0), le32(5), []byte{0})),
		"dbpointer short":           elem(0x0C, cat(le32(2), []byte("n\x00"), make([]byte, 11))),
		"dbpointer ns not NUL":      elem(0x0C, cat(le32(2), []byte("nx"), make([]byte, 12))),
		"regex one cstring":         elem(0x0B, []byte("abc\x00")),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := bson.MarshalExtJSON(bson.Raw(doc), true, false); err == nil {
				t.Fatalf("the case is not malformed for the driver")
			}
			got, err := marshalExtJSON(doc)
			if err == nil {
				t.Fatalf("accepted, returned %s", got)
			}
			if !strings.Contains(err.Error(), "malformed BSON at byte") {
				t.Errorf("error %q does not say where", err)
			}
		})
	}
}

// TestExtJSONQuirksTheDriverAccepts covers malformed nested values the driver encodes anyway,
// because it reads them sequentially: ours must encode them the same, not refuse them.
func TestExtJSONQuirksTheDriverAccepts(t *testing.T) {
	docs := map[string][]byte{
		// The code string's last byte is dropped without a check that it is 0x00.
		"code with scope, code not NUL-ended": elem(0x0F, cat(le32(4+4+3+5), le32(3), []byte("abX"), le32(5), []byte{0})),
		// At the top level the bytes after the old binary's inner length are left unread.
		"old binary, inner length short": elem(0x05, cat(le32(8), []byte{0x02}, le32(1), []byte("abcd"))),
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			if _, err := bson.MarshalExtJSON(bson.Raw(doc), true, false); err != nil {
				t.Fatalf("the driver refuses it (%v): the case tests nothing", err)
			}
			sameAsDriver(t, doc)
		})
	}
}

// TestExtJSONEveryByteInStrings puts each of the 256 byte values, alone and after a multi-byte
// character, in a key, a string, a regex and a DBPointer namespace.
func TestExtJSONEveryByteInStrings(t *testing.T) {
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		docs := []bson.D{{{Key: "s", Value: s}, {Key: "t", Value: "é" + s + "x"}, {Key: "j", Value: bson.JavaScript(s)}}}
		if c != 0 {
			docs = append(docs, bson.D{{Key: "k" + s, Value: int32(c)}, {Key: "r", Value: bson.Regex{Pattern: s, Options: s + "a"}},
				{Key: "p", Value: bson.DBPointer{DB: s, Pointer: bson.ObjectID{}}}})
		}
		for _, d := range docs {
			sameAsDriver(t, marshal(t, d))
		}
	}
}

// genValue returns a random value of a random BSON type, nested up to depth.
func genValue(r *rand.Rand, depth int) any {
	strs := []string{"", "a", "hello world", "é漢😀", "\u2028\u2029", "q\"\\/\n\r\t\b\f\x00\x01\x1f\x7f", "\xff\xfe", "\xed\xa0\x80", "<&>"}
	str := func() string {
		if r.IntN(3) == 0 {
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			return string(b)
		}
		return strs[r.IntN(len(strs))]
	}
	cstr := func() string { return strings.ReplaceAll(str(), "\x00", "") }
	doubles := []float64{0, math.Copysign(0, -1), 1, -1.5, 1e21, 1e20, 1e-7, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(0xfff8000000000000)}
	switch k := r.IntN(21); {
	case k == 0:
		if r.IntN(2) == 0 {
			return doubles[r.IntN(len(doubles))]
		}
		return math.Float64frombits(r.Uint64())
	case k == 1:
		return str()
	case k == 2 && depth > 0:
		return genDoc(r, depth-1)
	case k == 3 && depth > 0:
		a := bson.A{}
		for range r.IntN(4) {
			a = append(a, genValue(r, depth-1))
		}
		return a
	case k == 4:
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		sub := byte(r.IntN(256))
		if sub == 0x02 {
			sub = 0x00 // bson.Marshal writes the old subtype's inner length; covered by the table
		}
		return bson.Binary{Subtype: sub, Data: b}
	case k == 5:
		return bson.Undefined{}
	case k == 6:
		var id bson.ObjectID
		for i := range id {
			id[i] = byte(r.IntN(256))
		}
		return id
	case k == 7:
		return r.IntN(2) == 0
	case k == 8:
		return bson.DateTime(int64(r.Uint64()))
	case k == 9:
		return nil
	case k == 10:
		return bson.Regex{Pattern: cstr(), Options: cstr()}
	case k == 11:
		return bson.DBPointer{DB: str(), Pointer: bson.NewObjectID()}
	case k == 12:
		return bson.JavaScript(str())
	case k == 13:
		return bson.Symbol(str())
	case k == 14 && depth > 0:
		return bson.CodeWithScope{Code: bson.JavaScript(str()), Scope: genDoc(r, depth-1)}
	case k == 15:
		return int32(r.Uint32())
	case k == 16:
		return bson.Timestamp{T: r.Uint32(), I: r.Uint32()}
	case k == 17:
		return int64(r.Uint64())
	case k == 18:
		return bson.NewDecimal128(r.Uint64(), r.Uint64())
	case k == 19:
		return bson.MinKey{}
	case k == 20:
		return bson.MaxKey{}
	}
	return int32(depth)
}

func genDoc(r *rand.Rand, depth int) bson.D {
	d := bson.D{}
	for range r.IntN(6) {
		key := []string{"_id", "a", "k\"ey", "é", "\xff", "", "$set"}[r.IntN(7)]
		d = append(d, bson.E{Key: key, Value: genValue(r, depth)})
	}
	return d
}

// TestExtJSONDifferential compares ours with the driver over generated documents of every
// type, nested, with edge values, invalid UTF-8 and random bytes.
func TestExtJSONDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 2026))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		doc, err := bson.Marshal(genDoc(r, 4))
		if err != nil {
			t.Fatal(err)
		}
		sameAsDriver(t, doc)
	}
}

// extjsonSeeds are the fuzzer's seed corpus: a change event, every type, and malformed bytes.
func extjsonSeeds(t testing.TB) [][]byte {
	r := rand.New(rand.NewPCG(7, 7))
	seeds := [][]byte{
		changeEvent(t),
		nil, {5, 0, 0, 0, 0}, {5, 0, 0, 0, 1}, {4, 0, 0, 0},
		elem(0x05, cat(le32(7), []byte{0x02}, le32(3), []byte("abc"))),
		elem(0x0F, cat(le32(4+4+3+5), le32(3), []byte("abX"), le32(5), []byte{0})),
		elem(0x03, cat(le32(12), []byte{0x08, 'b', 0, 1}, []byte{0x0A, 'c', 0, 0})),
		elem(0x0B, []byte("p\x00z\xffé\x01a\x00")),
	}
	for range 20 {
		doc, err := bson.Marshal(genDoc(r, 3))
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, doc)
	}
	return seeds
}

// FuzzExtJSON: for any input, ours does not panic and agrees with the driver (both refuse it,
// or both return the same bytes); in particular for every input bson.Raw.Validate accepts.
// The seed corpus runs in go test; run the fuzzer itself with
// go test -run '^$' -fuzz FuzzExtJSON -fuzztime 2m ./sink.
func FuzzExtJSON(f *testing.F) {
	for _, s := range extjsonSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsDriver(t, data)
	})
}

// changeEvent is an update event with a full document, as a sink publishes it.
func changeEvent(t testing.TB) []byte {
	full := bson.Raw(marshal(t, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "customer", Value: "c-1842"},
		{Key: "amount", Value: 129.5}, {Key: "qty", Value: int32(3)}, {Key: "status", Value: "paid"},
		{Key: "created", Value: bson.DateTime(1700000000123)}, {Key: "items", Value: bson.A{
			bson.D{{Key: "sku", Value: "sku-1"}, {Key: "price", Value: 40.5}},
			bson.D{{Key: "sku", Value: "sku-2"}, {Key: "price", Value: 89.0}}}},
		{Key: "note", Value: "leave at the door, \"back\" entrance"}}))
	ev, err := watchtree.TestEvent[bson.Raw]{Namespace: watchtree.Namespace{DB: "shop", Coll: "orders"},
		OperationType: watchtree.OpUpdate, FullDocument: &full}.Build()
	if err != nil {
		t.Fatal(err)
	}
	return ev.Raw()
}

// BenchmarkExtJSON encodes one change event (an update with its full document) with ours
// (ns/op) and with bson.MarshalExtJSON in the same run (driver-ns/op), and reports
// speedup = driver-ns/op / ns/op.
func BenchmarkExtJSON(b *testing.B) {
	doc := changeEvent(b)
	if err := bson.Raw(doc).Validate(); err != nil {
		b.Fatal(err)
	}
	sameAsDriver(b, doc)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := marshalExtJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		if _, err := bson.MarshalExtJSON(bson.Raw(doc), true, false); err != nil {
			b.Fatal(err)
		}
	}
	driver := time.Since(start)
	b.ReportMetric(float64(driver.Nanoseconds())/float64(b.N), "driver-ns/op")
	b.ReportMetric(driver.Seconds()/ours.Seconds(), "speedup")
}

type capture struct{ m *Message }

func (c *capture) Publish(_ context.Context, m *Message) error { c.m = m; return nil }

// TestHandlerDefaultEncoding: the handler's default payload and message key are the driver's
// canonical Extended JSON of the event and of its document key.
func TestHandlerDefaultEncoding(t *testing.T) {
	c := &capture{}
	h, err := Handler[bson.Raw](c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw := bson.Raw(changeEvent(t))
	evs, err := watchtree.TestEvent[bson.Raw]{Namespace: watchtree.Namespace{DB: "shop", Coll: "orders"}, OperationType: watchtree.OpUpdate,
		FullDocument: func() *bson.Raw { f := raw.Lookup("fullDocument").Document(); return &f }()}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	want, _ := bson.MarshalExtJSON(evs.Raw(), true, false)
	if !bytes.Equal(c.m.Payload, want) {
		t.Errorf("payload %s, want %s", c.m.Payload, want)
	}
	wantKey, _ := bson.MarshalExtJSON(evs.DocumentKey(), true, false)
	if c.m.Key != string(wantKey) || !strings.Contains(c.m.Key, `{"_id":{"$oid":"`) {
		t.Errorf("key %s, want %s", c.m.Key, wantKey)
	}
}
