package query

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Canonical type brackets, in MongoDB comparison order. Values of different
// brackets compare by bracket; values within a bracket compare by value.
const (
	orderMinKey        = -1
	orderNull          = 5 // null and undefined share a bracket
	orderNumber        = 10
	orderString        = 15 // string and symbol
	orderObject        = 20
	orderArray         = 25
	orderBinary        = 30
	orderObjectID      = 35
	orderBool          = 40
	orderDate          = 45
	orderTimestamp     = 47
	orderRegex         = 50
	orderDBPointer     = 55
	orderJavaScript    = 60
	orderCodeWithScope = 65
	orderMaxKey        = 127
	orderUnknown       = 200 // Go values that are not BSON values; compared by their printed form
)

// TypeOrder returns the canonical type bracket of v (MinKey lowest, MaxKey
// highest). nil and bson.Undefined share the null bracket; int32, int64,
// float64 and bson.Decimal128 share the number bracket; string and
// bson.Symbol share the string bracket.
func TypeOrder(v any) int {
	switch v.(type) {
	case bson.MinKey:
		return orderMinKey
	case nil, bson.Undefined, bson.Null:
		return orderNull
	case int32, int64, float64, bson.Decimal128, int:
		return orderNumber
	case string, bson.Symbol:
		return orderString
	case bson.D, bson.M, map[string]any:
		return orderObject
	case bson.A, []any:
		return orderArray
	case bson.Binary, []byte:
		return orderBinary
	case bson.ObjectID:
		return orderObjectID
	case bool:
		return orderBool
	case bson.DateTime:
		return orderDate
	case bson.Timestamp:
		return orderTimestamp
	case bson.Regex:
		return orderRegex
	case bson.DBPointer:
		return orderDBPointer
	case bson.JavaScript:
		return orderJavaScript
	case bson.CodeWithScope:
		return orderCodeWithScope
	case bson.MaxKey:
		return orderMaxKey
	}
	return orderUnknown
}

// Compare orders two BSON values the way the server does: first by
// canonical type bracket (MinKey < null/undefined < numbers < string/symbol
// < object < array < binData < objectId < bool < date < timestamp < regex <
// dbPointer < javascript < codeWithScope < MaxKey), then by value. Numbers
// compare numerically across int32/int64/double/Decimal128; NaN equals NaN
// and sorts below every other number. Strings compare by bytes (no
// collation). It returns -1, 0 or +1.
func Compare(a, b any) int {
	ta, tb := TypeOrder(a), TypeOrder(b)
	if ta != tb {
		return sign(ta - tb)
	}
	switch ta {
	case orderMinKey, orderNull, orderMaxKey:
		return 0
	case orderNumber:
		return compareNumbers(a, b)
	case orderString:
		return strings.Compare(stringValue(a), stringValue(b))
	case orderObject:
		return compareDocs(asDoc(a), asDoc(b))
	case orderArray:
		return compareArrays(asArray(a), asArray(b))
	case orderBinary:
		x, y := asBinary(a), asBinary(b)
		if len(x.Data) != len(y.Data) {
			return sign(len(x.Data) - len(y.Data))
		}
		if x.Subtype != y.Subtype {
			return sign(int(x.Subtype) - int(y.Subtype))
		}
		return bytes.Compare(x.Data, y.Data)
	case orderObjectID:
		x, y := a.(bson.ObjectID), b.(bson.ObjectID)
		return bytes.Compare(x[:], y[:])
	case orderBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case orderDate:
		return cmpOrdered(int64(a.(bson.DateTime)), int64(b.(bson.DateTime)))
	case orderTimestamp:
		x, y := a.(bson.Timestamp), b.(bson.Timestamp)
		if x.T != y.T {
			return cmpOrdered(x.T, y.T)
		}
		return cmpOrdered(x.I, y.I)
	case orderRegex:
		x, y := a.(bson.Regex), b.(bson.Regex)
		if c := strings.Compare(x.Pattern, y.Pattern); c != 0 {
			return c
		}
		return strings.Compare(x.Options, y.Options)
	case orderDBPointer:
		x, y := a.(bson.DBPointer), b.(bson.DBPointer)
		if len(x.DB) != len(y.DB) {
			return sign(len(x.DB) - len(y.DB))
		}
		if c := strings.Compare(x.DB, y.DB); c != 0 {
			return c
		}
		return bytes.Compare(x.Pointer[:], y.Pointer[:])
	case orderJavaScript:
		return strings.Compare(string(a.(bson.JavaScript)), string(b.(bson.JavaScript)))
	case orderCodeWithScope:
		x, y := a.(bson.CodeWithScope), b.(bson.CodeWithScope)
		if c := strings.Compare(string(x.Code), string(y.Code)); c != 0 {
			return c
		}
		return Compare(x.Scope, y.Scope)
	}
	return strings.Compare(fmt.Sprintf("%T%v", a, a), fmt.Sprintf("%T%v", b, b))
}

// Equal reports whether Compare(a, b) == 0: int32(1), int64(1), 1.0 and
// Decimal128 1 are all equal; nil equals bson.Undefined.
func Equal(a, b any) bool { return Compare(a, b) == 0 }

func sign(i int) int {
	switch {
	case i < 0:
		return -1
	case i > 0:
		return 1
	}
	return 0
}

func cmpOrdered[T int64 | uint32 | float64 | int](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func stringValue(v any) string {
	if s, ok := v.(bson.Symbol); ok {
		return string(s)
	}
	return v.(string)
}

// asDoc converts object-bracket values to bson.D (maps are ordered by key).
func asDoc(v any) bson.D {
	switch d := v.(type) {
	case bson.D:
		return d
	case bson.M:
		return mapToD(d)
	case map[string]any:
		return mapToD(d)
	}
	return nil
}

func mapToD(m map[string]any) bson.D {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := make(bson.D, 0, len(keys))
	for _, k := range keys {
		d = append(d, bson.E{Key: k, Value: m[k]})
	}
	return d
}

func asArray(v any) bson.A {
	switch a := v.(type) {
	case bson.A:
		return a
	case []any:
		return bson.A(a)
	}
	return nil
}

func asBinary(v any) bson.Binary {
	if b, ok := v.([]byte); ok {
		return bson.Binary{Data: b}
	}
	return v.(bson.Binary)
}

func compareDocs(a, b bson.D) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if t := sign(TypeOrder(a[i].Value) - TypeOrder(b[i].Value)); t != 0 {
			return t
		}
		if c := strings.Compare(a[i].Key, b[i].Key); c != 0 {
			return c
		}
		if c := Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return sign(len(a) - len(b))
}

func compareArrays(a, b bson.A) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return sign(len(a) - len(b))
}

// ---- numbers ----

// isNumber reports whether v is a BSON number (int32, int64, double, decimal).
func isNumber(v any) bool {
	switch v.(type) {
	case int32, int64, float64, bson.Decimal128, int:
		return true
	}
	return false
}

// intValue returns v as int64 when v is an integer type.
func intValue(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

const two63 = 9223372036854775808.0

func compareIntDouble(i int64, f float64) int {
	if math.IsNaN(f) {
		return 1
	}
	if f >= two63 {
		return -1
	}
	if f < -two63 {
		return 1
	}
	t := math.Trunc(f)
	fi := int64(t)
	if i != fi {
		return cmpOrdered(i, fi)
	}
	switch frac := f - t; {
	case frac > 0:
		return -1
	case frac < 0:
		return 1
	}
	return 0
}

func compareDoubles(x, y float64) int {
	xn, yn := math.IsNaN(x), math.IsNaN(y)
	switch {
	case xn && yn:
		return 0
	case xn:
		return -1
	case yn:
		return 1
	}
	return cmpOrdered(x, y)
}

// numClass places special values: 0 NaN, 1 -Inf, 2 finite, 3 +Inf.
type exactNum struct {
	class int
	rat   *big.Rat // only for finite
}

func toExact(v any) exactNum {
	switch n := v.(type) {
	case int32, int64, int:
		i, _ := intValue(n)
		return exactNum{class: 2, rat: new(big.Rat).SetInt64(i)}
	case float64:
		switch {
		case math.IsNaN(n):
			return exactNum{class: 0}
		case math.IsInf(n, -1):
			return exactNum{class: 1}
		case math.IsInf(n, 1):
			return exactNum{class: 3}
		}
		return exactNum{class: 2, rat: new(big.Rat).SetFloat64(n)}
	case bson.Decimal128:
		return decimalExact(n)
	}
	return exactNum{class: 0}
}

func decimalExact(d bson.Decimal128) exactNum {
	if d.IsNaN() {
		return exactNum{class: 0}
	}
	switch d.IsInf() {
	case -1:
		return exactNum{class: 1}
	case 1:
		return exactNum{class: 3}
	}
	bi, exp, err := d.BigInt()
	if err != nil {
		return exactNum{class: 0}
	}
	r := new(big.Rat).SetInt(bi)
	if exp != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(absInt(exp))), nil)
		if exp > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	return exactNum{class: 2, rat: r}
}

func absInt(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

func compareNumbers(a, b any) int {
	ai, aInt := intValue(a)
	bi, bInt := intValue(b)
	af, aDbl := a.(float64)
	bf, bDbl := b.(float64)
	switch {
	case aInt && bInt:
		return cmpOrdered(ai, bi)
	case aDbl && bDbl:
		return compareDoubles(af, bf)
	case aInt && bDbl:
		return compareIntDouble(ai, bf)
	case aDbl && bInt:
		return -compareIntDouble(bi, af)
	}
	x, y := toExact(a), toExact(b)
	if x.class != y.class {
		return sign(x.class - y.class)
	}
	if x.class != 2 {
		return 0
	}
	return x.rat.Cmp(y.rat)
}

// numberKey is the canonical text of a number's exact value.
func numberKey(v any) string {
	if i, ok := intValue(v); ok {
		return strconv.FormatInt(i, 10)
	}
	if f, ok := v.(float64); ok && !math.IsNaN(f) && !math.IsInf(f, 0) && f == math.Trunc(f) && f >= -two63 && f < two63 {
		return strconv.FormatInt(int64(f), 10)
	}
	e := toExact(v)
	switch e.class {
	case 0:
		return "NaN"
	case 1:
		return "-Inf"
	case 3:
		return "+Inf"
	}
	return e.rat.RatString()
}

// ---- hashing ----

// HashKey returns a canonical string for v such that Equal(a, b) holds
// exactly when HashKey(a) == HashKey(b): numbers are normalised to their
// exact value (1, int64(1), 1.0 and Decimal128 "1" share a key; -0 == 0),
// strings and symbols share keys, field order in documents matters.
// Used for _id maps and unique indexes.
func HashKey(v any) string {
	var sb strings.Builder
	hashInto(&sb, v)
	return sb.String()
}

func writeLenStr(sb *strings.Builder, s string) {
	sb.WriteString(strconv.Itoa(len(s)))
	sb.WriteByte(':')
	sb.WriteString(s)
}

func hashInto(sb *strings.Builder, v any) {
	switch TypeOrder(v) {
	case orderMinKey:
		sb.WriteByte('<')
	case orderNull:
		sb.WriteByte('z')
	case orderMaxKey:
		sb.WriteByte('>')
	case orderNumber:
		sb.WriteByte('n')
		sb.WriteString(numberKey(v))
		sb.WriteByte(';')
	case orderString:
		sb.WriteByte('s')
		writeLenStr(sb, stringValue(v))
	case orderObject:
		sb.WriteByte('{')
		for _, e := range asDoc(v) {
			writeLenStr(sb, e.Key)
			hashInto(sb, e.Value)
		}
		sb.WriteByte('}')
	case orderArray:
		sb.WriteByte('[')
		for _, e := range asArray(v) {
			hashInto(sb, e)
		}
		sb.WriteByte(']')
	case orderBinary:
		b := asBinary(v)
		sb.WriteByte('b')
		sb.WriteString(strconv.Itoa(int(b.Subtype)))
		sb.WriteByte(',')
		writeLenStr(sb, hex.EncodeToString(b.Data))
	case orderObjectID:
		id := v.(bson.ObjectID)
		sb.WriteByte('i')
		sb.WriteString(hex.EncodeToString(id[:]))
	case orderBool:
		if v.(bool) {
			sb.WriteByte('T')
		} else {
			sb.WriteByte('F')
		}
	case orderDate:
		sb.WriteByte('d')
		sb.WriteString(strconv.FormatInt(int64(v.(bson.DateTime)), 10))
		sb.WriteByte(';')
	case orderTimestamp:
		t := v.(bson.Timestamp)
		fmt.Fprintf(sb, "t%d,%d;", t.T, t.I)
	case orderRegex:
		r := v.(bson.Regex)
		sb.WriteByte('r')
		writeLenStr(sb, r.Pattern)
		writeLenStr(sb, r.Options)
	case orderDBPointer:
		p := v.(bson.DBPointer)
		sb.WriteByte('p')
		writeLenStr(sb, p.DB)
		sb.WriteString(hex.EncodeToString(p.Pointer[:]))
	case orderJavaScript:
		sb.WriteByte('j')
		writeLenStr(sb, string(v.(bson.JavaScript)))
	case orderCodeWithScope:
		c := v.(bson.CodeWithScope)
		sb.WriteByte('c')
		writeLenStr(sb, string(c.Code))
		hashInto(sb, c.Scope)
	default:
		sb.WriteByte('?')
		writeLenStr(sb, fmt.Sprintf("%T%v", v, v))
	}
}
