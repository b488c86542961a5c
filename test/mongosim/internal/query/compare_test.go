package query

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// qaDoc parses relaxed Extended JSON into a bson.D (ints become int32,
// large ints int64, fractions float64).
func qaDoc(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("bad ext JSON %s: %v", s, err)
	}
	return d
}

// qaVal parses one Extended JSON value.
func qaVal(t testing.TB, s string) any {
	t.Helper()
	return qaDoc(t, `{"v":`+s+`}`)[0].Value
}

func qaDec(t testing.TB, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestQueryCompareOrder(t *testing.T) {
	oid1 := bson.ObjectID{1}
	oid2 := bson.ObjectID{2}
	// Each value is strictly less than the next.
	ordered := []any{
		bson.MinKey{},
		nil,
		math.NaN(),
		math.Inf(-1),
		int64(math.MinInt64),
		int32(-5),
		-0.5,
		int32(0),
		0.5,
		int64(1) << 53,
		int64(1)<<53 + 1,
		float64(1 << 62),
		int64(math.MaxInt64),
		9223372036854775808.0,
		math.Inf(1),
		"",
		"A",
		"a",
		"ab",
		"b",
		bson.D{},
		bson.D{{Key: "a", Value: int32(1)}},
		bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(0)}},
		bson.D{{Key: "b", Value: int32(0)}},
		bson.D{{Key: "a", Value: "x"}}, // the value's type bracket is compared before the field name
		bson.A{},
		bson.A{int32(1)},
		bson.A{int32(1), int32(2)},
		bson.A{int32(2)},
		bson.A{"a"},
		bson.Binary{Subtype: 5, Data: []byte{9}},
		bson.Binary{Subtype: 0, Data: []byte{1, 2}},
		bson.Binary{Subtype: 0, Data: []byte{1, 3}},
		bson.Binary{Subtype: 4, Data: []byte{0, 0}},
		oid1,
		oid2,
		false,
		true,
		bson.DateTime(-1),
		bson.DateTime(5),
		bson.Timestamp{T: 1, I: 9},
		bson.Timestamp{T: 2, I: 0},
		bson.Regex{Pattern: "a", Options: "i"},
		bson.Regex{Pattern: "b", Options: ""},
		bson.Regex{Pattern: "b", Options: "i"},
		bson.DBPointer{DB: "x", Pointer: oid1},
		bson.JavaScript("f()"),
		bson.CodeWithScope{Code: "f()", Scope: bson.D{}},
		bson.MaxKey{},
	}
	for i := range ordered {
		for j := range ordered {
			want := sign(i - j)
			if got := Compare(ordered[i], ordered[j]); got != want {
				t.Errorf("Compare(%#v, %#v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestQueryCompareEqualities(t *testing.T) {
	d1 := qaDec(t, "1")
	d10 := qaDec(t, "1.0")
	half := qaDec(t, "0.5")
	equal := [][2]any{
		{int32(1), int64(1)},
		{int32(1), 1.0},
		{int64(1), d1},
		{1.0, d10},
		{d1, d10},
		{half, 0.5},
		{0.0, math.Copysign(0, -1)},
		{qaDec(t, "-0"), int32(0)},
		{math.NaN(), math.NaN()},
		{math.NaN(), qaDec(t, "NaN")},
		{math.Inf(1), qaDec(t, "Infinity")},
		{nil, bson.Undefined{}},
		{"abc", bson.Symbol("abc")},
		{bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "a", Value: 1.0}}},
		{bson.A{int32(1), "x"}, bson.A{int64(1), bson.Symbol("x")}},
		{bson.MinKey{}, bson.MinKey{}},
		{bson.MaxKey{}, bson.MaxKey{}},
		{bson.Binary{Subtype: 4, Data: []byte{1}}, bson.Binary{Subtype: 4, Data: []byte{1}}},
	}
	for _, p := range equal {
		if !Equal(p[0], p[1]) || !Equal(p[1], p[0]) {
			t.Errorf("Equal(%#v, %#v) = false", p[0], p[1])
		}
		if HashKey(p[0]) != HashKey(p[1]) {
			t.Errorf("HashKey(%#v)=%q != HashKey(%#v)=%q", p[0], HashKey(p[0]), p[1], HashKey(p[1]))
		}
	}
	notEqual := [][2]any{
		{int32(1), "1"},
		{0.1, qaDec(t, "0.1")}, // the double is not exactly 1/10
		{int64(1)<<53 + 1, float64(1 << 53)},
		{bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)}}, bson.D{{Key: "b", Value: int32(2)}, {Key: "a", Value: int32(1)}}},
		{bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "b", Value: int32(1)}}},
		{bson.A{int32(1)}, int32(1)},
		{bson.A{bson.A{}}, bson.A{}},
		{nil, bson.MinKey{}},
		{false, int32(0)},
		{bson.DateTime(0), bson.Timestamp{}},
		{bson.Regex{Pattern: "a"}, bson.Regex{Pattern: "a", Options: "i"}},
		{bson.Binary{Subtype: 0, Data: []byte{1}}, bson.Binary{Subtype: 4, Data: []byte{1}}},
		{"a", "a\x00"},
		{bson.JavaScript("x"), "x"},
		{math.NaN(), math.Inf(-1)},
	}
	for _, p := range notEqual {
		if Equal(p[0], p[1]) {
			t.Errorf("Equal(%#v, %#v) = true", p[0], p[1])
		}
		if HashKey(p[0]) == HashKey(p[1]) {
			t.Errorf("HashKey(%#v) == HashKey(%#v) = %q", p[0], p[1], HashKey(p[0]))
		}
	}
}

func TestQueryHashKeyNoPrefixAmbiguity(t *testing.T) {
	// Structures that could collide under a naive concatenation.
	vals := []any{
		bson.A{"ab", "c"},
		bson.A{"a", "bc"},
		bson.A{bson.A{"a"}, "b"},
		bson.A{bson.A{"a", "b"}},
		bson.D{{Key: "a", Value: "b"}, {Key: "c", Value: "d"}},
		bson.D{{Key: "a", Value: bson.D{{Key: "c", Value: "d"}}}},
		bson.D{{Key: "ab", Value: ""}},
		bson.A{int32(12), int32(3)},
		bson.A{int32(1), int32(23)},
	}
	seen := map[string]int{}
	for i, v := range vals {
		k := HashKey(v)
		if j, dup := seen[k]; dup {
			t.Errorf("HashKey collision between %#v and %#v: %q", vals[j], v, k)
		}
		seen[k] = i
	}
}

func TestQueryTypeOrder(t *testing.T) {
	if TypeOrder(nil) != TypeOrder(bson.Undefined{}) {
		t.Error("null and undefined must share a bracket")
	}
	if TypeOrder(int32(1)) != TypeOrder(qaDec(t, "2")) || TypeOrder(1.5) != TypeOrder(int64(2)) {
		t.Error("numbers must share a bracket")
	}
	if TypeOrder("a") != TypeOrder(bson.Symbol("a")) {
		t.Error("string and symbol must share a bracket")
	}
	if !(TypeOrder(bson.MinKey{}) < TypeOrder(nil) && TypeOrder(true) < TypeOrder(bson.DateTime(0)) && TypeOrder(bson.DateTime(0)) < TypeOrder(bson.Timestamp{}) && TypeOrder(bson.Regex{}) < TypeOrder(bson.MaxKey{})) {
		t.Error("bracket order wrong")
	}
}

// qaRandomValue builds a random BSON value biased towards values that
// compare equal across types (small numbers in every numeric type).
func qaRandomValue(r *rand.Rand, depth int) any {
	n := r.IntN(16)
	if depth > 2 && n >= 12 {
		n = r.IntN(12)
	}
	small := int64(r.IntN(5) - 2)
	switch n {
	case 0:
		return int32(small)
	case 1:
		return small
	case 2:
		return float64(small) + []float64{0, 0.5, 0}[r.IntN(3)]
	case 3:
		d, _ := bson.ParseDecimal128([]string{"0", "-0", "1", "1.0", "0.5", "2", "-1", "NaN"}[r.IntN(8)])
		return d
	case 4:
		return []any{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}[r.IntN(4)]
	case 5:
		return []string{"", "a", "b", "ab"}[r.IntN(4)]
	case 6:
		return bson.Symbol([]string{"a", "b"}[r.IntN(2)])
	case 7:
		return []any{nil, bson.Undefined{}, bson.MinKey{}, bson.MaxKey{}}[r.IntN(4)]
	case 8:
		return r.IntN(2) == 0
	case 9:
		return bson.DateTime(small)
	case 10:
		return bson.Timestamp{T: uint32(r.IntN(2)), I: uint32(r.IntN(2))}
	case 11:
		return bson.Binary{Subtype: byte(r.IntN(2)), Data: []byte{byte(r.IntN(2))}[:r.IntN(2)]}
	case 12, 13:
		var a bson.A
		for i := r.IntN(3); i > 0; i-- {
			a = append(a, qaRandomValue(r, depth+1))
		}
		return a
	default:
		var d bson.D
		for i := r.IntN(3); i > 0; i-- {
			d = append(d, bson.E{Key: []string{"a", "b"}[r.IntN(2)], Value: qaRandomValue(r, depth+1)})
		}
		return d
	}
}

func TestQueryCompareProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]any, 300)
	for i := range vals {
		vals[i] = qaRandomValue(r, 0)
	}
	for _, a := range vals {
		for _, b := range vals {
			ab, ba := Compare(a, b), Compare(b, a)
			if ab != -ba {
				t.Fatalf("Compare not antisymmetric: %#v vs %#v: %d, %d", a, b, ab, ba)
			}
			if (ab == 0) != (HashKey(a) == HashKey(b)) {
				t.Fatalf("Equal/HashKey disagree for %#v and %#v (%d, %q, %q)", a, b, ab, HashKey(a), HashKey(b))
			}
		}
	}
	// Transitivity, checked by sorting and verifying every pair is ordered.
	sorted := append([]any(nil), vals...)
	slices.SortFunc(sorted, Compare)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if Compare(sorted[i], sorted[j]) > 0 {
				t.Fatalf("order not transitive: %#v > %#v", sorted[i], sorted[j])
			}
		}
	}
}
