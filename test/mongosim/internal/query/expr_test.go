package query

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// qbDoc parses relaxed Extended JSON into a bson.D.
func qbDoc(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("bad ext JSON %s: %v", s, err)
	}
	return d
}

// qbVal parses one Extended JSON value.
func qbVal(t testing.TB, s string) any {
	t.Helper()
	return qbDoc(t, `{"v":`+s+`}`)[0].Value
}

// qbJSON renders a value as canonical Extended JSON (types visible).
func qbJSON(v any) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
	if err != nil {
		return renderValue(v)
	}
	return string(b)
}

// qbCode returns the code of a query *Error, or -1.
func qbCode(err error) int32 {
	var qe *Error
	if errors.As(err, &qe) {
		return qe.Code
	}
	return -1
}

var qbNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func qbEnv() *Env {
	return &Env{Now: qbNow, ClusterTime: bson.Timestamp{T: 100, I: 2}, Vars: map[string]any{"uv": int32(7)}}
}

func TestQueryEval(t *testing.T) {
	doc := `{"_id": 1, "a": 1, "b": 2, "big": 2147483647, "l": {"$numberLong": "5"}, "d": 1.5, "s": "Hello",
		"n": null, "arr": [1, 2, 3], "sub": {"x": 10, "y": {"z": "deep"}},
		"objs": [{"k": 1}, {"k": 2}, {"j": 3}, 4, [{"k": 5}]],
		"dt": {"$date": "2026-01-01T00:00:00Z"}, "owner": "other", "expiresAt": {"$date": "2026-01-01T00:00:00Z"}}`
	tests := []struct {
		name string
		expr string
		want string // Extended JSON value; "" with code set = error
		code int32
	}{
		{"literal number", `5`, `5`, 0},
		{"plain string", `"abc"`, `"abc"`, 0},
		{"field", `"$a"`, `1`, 0},
		{"nested field", `"$sub.y.z"`, `"deep"`, 0},
		{"missing field is null", `"$nope"`, `null`, 0},
		{"array traversal", `"$objs.k"`, `[1, 2, [5]]`, 0},
		{"numeric part is a field name", `"$arr.0"`, `[]`, 0},
		{"ROOT", `"$$ROOT.a"`, `1`, 0},
		{"CURRENT", `"$$CURRENT.b"`, `2`, 0},
		{"NOW", `"$$NOW"`, `{"$date": "2026-01-02T03:04:05Z"}`, 0},
		{"CLUSTER_TIME", `"$$CLUSTER_TIME"`, `{"$timestamp": {"t": 100, "i": 2}}`, 0},
		{"REMOVE in object drops field", `{"x": "$$REMOVE", "y": 1}`, `{"y": 1}`, 0},
		{"user var", `"$$uv"`, `7`, 0},
		{"undefined var", `"$$nope"`, ``, 17276},
		{"literal", `{"$literal": "$a"}`, `"$a"`, 0},
		{"doc literal", `{"p": "$a", "q": {"r": "$b"}}`, `{"p": 1, "q": {"r": 2}}`, 0},
		{"array literal", `["$a", "$nope", 3]`, `[1, null, 3]`, 0},
		{"add ints", `{"$add": ["$a", "$b"]}`, `3`, 0},
		{"add overflow int32", `{"$add": ["$big", 1]}`, `{"$numberLong": "2147483648"}`, 0},
		{"add long", `{"$add": ["$a", "$l"]}`, `{"$numberLong": "6"}`, 0},
		{"add double", `{"$add": ["$a", "$d"]}`, `2.5`, 0},
		{"add null", `{"$add": ["$a", "$n"]}`, `null`, 0},
		{"add missing", `{"$add": ["$a", "$nope"]}`, `null`, 0},
		{"add date", `{"$add": ["$dt", 60000]}`, `{"$date": "2026-01-01T00:01:00Z"}`, 0},
		{"add NOW", `{"$add": ["$$NOW", 1000]}`, `{"$date": "2026-01-02T03:04:06Z"}`, 0},
		{"add two dates", `{"$add": ["$dt", "$dt"]}`, ``, 16612},
		{"add string", `{"$add": ["$s", 1]}`, ``, 14},
		{"subtract", `{"$subtract": ["$b", "$a"]}`, `1`, 0},
		{"subtract dates", `{"$subtract": ["$$NOW", "$dt"]}`, `{"$numberLong": "97445000"}`, 0},
		{"subtract date ms", `{"$subtract": ["$dt", 1000]}`, `{"$date": "2025-12-31T23:59:59Z"}`, 0},
		{"subtract arity", `{"$subtract": ["$b"]}`, ``, 16020},
		{"multiply", `{"$multiply": [2, 3, "$l"]}`, `{"$numberLong": "30"}`, 0},
		{"multiply overflow", `{"$multiply": ["$big", 2]}`, `{"$numberLong": "4294967294"}`, 0},
		{"divide", `{"$divide": [3, 2]}`, `1.5`, 0},
		{"divide ints gives double", `{"$divide": [4, 2]}`, `2.0`, 0},
		{"divide by zero", `{"$divide": [1, 0]}`, ``, 2},
		{"mod", `{"$mod": [7, 3]}`, `1`, 0},
		{"mod negative", `{"$mod": [-7, 3]}`, `-1`, 0},
		{"mod zero", `{"$mod": [7, 0]}`, ``, 16610},
		{"abs", `{"$abs": -3}`, `3`, 0},
		{"abs null", `{"$abs": "$nope"}`, `null`, 0},
		{"floor", `{"$floor": 2.7}`, `2.0`, 0},
		{"cond array", `{"$cond": [{"$gt": ["$b", "$a"]}, "yes", "no"]}`, `"yes"`, 0},
		{"cond doc", `{"$cond": {"if": "$n", "then": "yes", "else": "no"}}`, `"no"`, 0},
		{"cond zero is false", `{"$cond": [0, "yes", "no"]}`, `"no"`, 0},
		{"cond missing else", `{"$cond": {"if": true, "then": 1}}`, ``, 17082},
		{"ifNull missing", `{"$ifNull": ["$nope", 0]}`, `0`, 0},
		{"ifNull null", `{"$ifNull": ["$n", "$nope", 5]}`, `5`, 0},
		{"ifNull present", `{"$ifNull": ["$a", 0]}`, `1`, 0},
		{"eq cross numeric", `{"$eq": ["$l", 5.0]}`, `true`, 0},
		{"ne", `{"$ne": ["$a", 1]}`, `false`, 0},
		{"lt date", `{"$lt": ["$expiresAt", "$$NOW"]}`, `true`, 0},
		{"lt missing vs number", `{"$lt": ["$nope", 1]}`, `true`, 0},
		{"eq missing vs null is false", `{"$eq": ["$nope", null]}`, `false`, 0},
		{"lt missing vs null", `{"$lt": ["$nope", "$n"]}`, `true`, 0},
		{"eq missing vs missing", `{"$eq": ["$nope", "$nope2"]}`, `true`, 0},
		{"gt missing vs minKey", `{"$gt": ["$nope", {"$minKey": 1}]}`, `true`, 0},
		{"in missing vs null", `{"$in": ["$nope", [null]]}`, `false`, 0},
		{"eq null vs null", `{"$eq": ["$n", null]}`, `true`, 0},
		{"gt types", `{"$gt": ["$s", 5]}`, `true`, 0},
		{"gte", `{"$gte": [2, 2]}`, `true`, 0},
		{"lte", `{"$lte": [3, 2]}`, `false`, 0},
		{"cmp", `{"$cmp": ["$a", "$b"]}`, `-1`, 0},
		{"eq arity", `{"$eq": [1]}`, ``, 16020},
		{"and", `{"$and": [1, "$a", true]}`, `true`, 0},
		{"and false", `{"$and": [1, "$n"]}`, `false`, 0},
		{"or", `{"$or": [false, "$nope", "$s"]}`, `true`, 0},
		{"not", `{"$not": ["$n"]}`, `true`, 0},
		{"max args", `{"$max": [1, "$l", null, 3]}`, `{"$numberLong": "5"}`, 0},
		{"max array", `{"$max": "$arr"}`, `3`, 0},
		{"min", `{"$min": [4, "$b", "$nope"]}`, `2`, 0},
		{"max all null", `{"$max": [null, "$nope"]}`, `null`, 0},
		{"max date", `{"$max": ["$expiresAt", "$$NOW"]}`, `{"$date": "2026-01-02T03:04:05Z"}`, 0},
		{"sum", `{"$sum": "$arr"}`, `6`, 0},
		{"avg", `{"$avg": [1, 2]}`, `1.5`, 0},
		{"concat", `{"$concat": ["$s", " ", "world"]}`, `"Hello world"`, 0},
		{"concat null", `{"$concat": ["$s", "$n"]}`, `null`, 0},
		{"concat number", `{"$concat": ["$s", 1]}`, ``, 16702},
		{"toString int", `{"$toString": "$a"}`, `"1"`, 0},
		{"toString double", `{"$toString": 2.5}`, `"2.5"`, 0},
		{"toString third", `{"$toString": {"$divide": [1, 3]}}`, `"0.333333333333333"`, 0},
		{"toString big double", `{"$toString": 123456789012.0}`, `"123456789012"`, 0},
		{"toString huge double", `{"$toString": 1e20}`, `"1e+20"`, 0},
		{"toString date", `{"$toString": "$dt"}`, `"2026-01-01T00:00:00.000Z"`, 0},
		{"toString null", `{"$toString": "$n"}`, `null`, 0},
		{"toLower", `{"$toLower": "$s"}`, `"hello"`, 0},
		{"toUpper", `{"$toUpper": ["$s"]}`, `"HELLO"`, 0},
		{"toUpper null", `{"$toUpper": "$nope"}`, `""`, 0},
		{"size", `{"$size": "$arr"}`, `3`, 0},
		{"size non array", `{"$size": "$s"}`, ``, 17124},
		{"in", `{"$in": [2, "$arr"]}`, `true`, 0},
		{"in numeric", `{"$in": [2.0, "$arr"]}`, `true`, 0},
		{"in not array", `{"$in": [2, "$s"]}`, ``, 40081},
		{"arrayElemAt", `{"$arrayElemAt": ["$arr", 1]}`, `2`, 0},
		{"arrayElemAt negative", `{"$arrayElemAt": ["$arr", -1]}`, `3`, 0},
		{"arrayElemAt out of range", `{"x": {"$arrayElemAt": ["$arr", 5]}}`, `{}`, 0},
		{"first", `{"$first": "$arr"}`, `1`, 0},
		{"last", `{"$last": "$arr"}`, `3`, 0},
		{"concatArrays", `{"$concatArrays": ["$arr", [4]]}`, `[1, 2, 3, 4]`, 0},
		{"type int", `{"$type": "$a"}`, `"int"`, 0},
		{"type long", `{"$type": "$l"}`, `"long"`, 0},
		{"type missing", `{"$type": "$nope"}`, `"missing"`, 0},
		{"type object", `{"$type": "$sub"}`, `"object"`, 0},
		{"type date", `{"$type": "$dt"}`, `"date"`, 0},
		{"isArray", `{"$isArray": "$arr"}`, `true`, 0},
		{"isArray literal", `{"$isArray": [[1]]}`, `true`, 0},
		{"isArray no", `{"$isArray": "$s"}`, `false`, 0},
		{"getField", `{"$getField": "s"}`, `"Hello"`, 0},
		{"getField input", `{"$getField": {"field": "x", "input": "$sub"}}`, `10`, 0},
		{"getField dotted name", `{"$getField": {"field": "a.b", "input": {"$literal": {"a.b": 3}}}}`, `3`, 0},
		{"mergeObjects", `{"$mergeObjects": ["$sub", {"x": 1, "w": 2}, null]}`, `{"x": 1, "y": {"z": "deep"}, "w": 2}`, 0},
		{"mergeObjects bad", `{"$mergeObjects": ["$sub", 1]}`, ``, 40400},
		{"switch", `{"$switch": {"branches": [{"case": {"$eq": ["$a", 2]}, "then": "two"}, {"case": {"$eq": ["$a", 1]}, "then": "one"}], "default": "other"}}`, `"one"`, 0},
		{"switch default", `{"$switch": {"branches": [{"case": false, "then": 1}], "default": "d"}}`, `"d"`, 0},
		{"switch no match", `{"$switch": {"branches": [{"case": false, "then": 1}]}}`, ``, 40066},
		{"let", `{"$let": {"vars": {"x": {"$add": ["$a", 1]}}, "in": {"$multiply": ["$$x", 10]}}}`, `20`, 0},
		{"map", `{"$map": {"input": "$arr", "as": "e", "in": {"$add": ["$$e", 1]}}}`, `[2, 3, 4]`, 0},
		{"filter", `{"$filter": {"input": "$arr", "cond": {"$gte": ["$$this", 2]}}}`, `[2, 3]`, 0},
		{"reduce", `{"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}`, `6`, 0},
		{"toInt string", `{"$toInt": "42"}`, `42`, 0},
		{"toInt double", `{"$toInt": 4.9}`, `4`, 0},
		{"toLong", `{"$toLong": "$a"}`, `{"$numberLong": "1"}`, 0},
		{"toDouble", `{"$toDouble": "$a"}`, `1.0`, 0},
		{"toInt bad", `{"$toInt": "x"}`, ``, 241},
		{"toBool", `{"$toBool": 0}`, `false`, 0},
		{"unknown operator", `{"$foo": 1}`, ``, 168},
		{"unsupported operator", `{"$regexMatch": {"input": "$s", "regex": "H"}}`, ``, 9000001},
		{"dateToString default", `{"$dateToString": {"date": "$dt"}}`, `"2026-01-01T00:00:00.000Z"`, 0},
		{"dateToString format tz", `{"$dateToString": {"date": "$$NOW", "format": "%Y/%m/%d %H:%M:%S.%L %z %j %u %w %V %G %U %%", "timezone": "+05:30"}}`,
			`"2026/01/02 08:34:05.000 +0530 002 5 6 01 2026 00 %"`, 0},
		{"dateToString onNull", `{"$dateToString": {"date": "$nope", "onNull": "none"}}`, `"none"`, 0},
		{"dateToString bad format", `{"$dateToString": {"date": "$dt", "format": "%Q"}}`, ``, 18536},
		{"year", `{"$year": "$$NOW"}`, `2026`, 0},
		{"month tz", `{"$month": {"date": "$dt", "timezone": "-01:00"}}`, `12`, 0},
		{"dayOfWeek", `{"$dayOfWeek": "$$NOW"}`, `6`, 0},
		{"hour", `{"$hour": ["$$NOW"]}`, `3`, 0},
		{"isoWeek", `{"$isoWeek": "$dt"}`, `1`, 0},
		{"date part null", `{"$year": "$nope"}`, `null`, 0},
		{"bad timezone", `{"$year": {"date": "$dt", "timezone": "Nowhere/Nothing"}}`, ``, 40485},
		{"dateAdd", `{"$dateAdd": {"startDate": "$dt", "unit": "month", "amount": 2}}`, `{"$date": "2026-03-01T00:00:00Z"}`, 0},
		{"dateSubtract", `{"$dateSubtract": {"startDate": "$dt", "unit": "hour", "amount": 1}}`, `{"$date": "2025-12-31T23:00:00Z"}`, 0},
		{"toDate string", `{"$toDate": "2026-01-01T00:00:00Z"}`, `{"$date": "2026-01-01T00:00:00Z"}`, 0},
		{"toDate long", `{"$toDate": {"$numberLong": "1000"}}`, `{"$date": "1970-01-01T00:00:01Z"}`, 0},
		{"strLenBytes", `{"$strLenBytes": "héllo"}`, `6`, 0},
		{"strLenCP", `{"$strLenCP": "héllo"}`, `5`, 0},
		{"substrCP", `{"$substrCP": ["héllo", 1, 3]}`, `"éll"`, 0},
		{"substrBytes", `{"$substrBytes": ["hello", 1, 2]}`, `"el"`, 0},
		{"split", `{"$split": ["a,b,c", ","]}`, `["a", "b", "c"]`, 0},
		{"trim", `{"$trim": {"input": "  x  "}}`, `"x"`, 0},
		{"ltrim chars", `{"$ltrim": {"input": "xxay", "chars": "x"}}`, `"ay"`, 0},
		{"strcasecmp", `{"$strcasecmp": ["abc", "ABD"]}`, `-1`, 0},
		{"round half even", `{"$round": [2.5]}`, `2.0`, 0},
		{"round place", `{"$round": [1.2345, 2]}`, `1.23`, 0},
		{"round int negative place", `{"$round": [1234, -2]}`, `1200`, 0},
		{"sqrt", `{"$sqrt": 16}`, `4.0`, 0},
		{"sqrt negative", `{"$sqrt": -1}`, ``, 28714},
		{"pow ints", `{"$pow": [2, 10]}`, `1024`, 0},
		{"pow negative exponent", `{"$pow": [2, -1]}`, `0.5`, 0},
		{"range", `{"$range": [0, 10, 3]}`, `[0, 3, 6, 9]`, 0},
		{"reverseArray", `{"$reverseArray": "$arr"}`, `[3, 2, 1]`, 0},
		{"indexOfArray", `{"$indexOfArray": ["$arr", 2]}`, `1`, 0},
		{"indexOfArray missing", `{"$indexOfArray": ["$arr", 9]}`, `-1`, 0},
		{"objectToArray", `{"$objectToArray": "$sub.y"}`, `[{"k": "z", "v": "deep"}]`, 0},
		{"arrayToObject", `{"$arrayToObject": [[["a", 1], ["b", 2]]]}`, `{"a": 1, "b": 2}`, 0},
		{"arrayToObject kv", `{"$arrayToObject": {"$literal": [{"k": "a", "v": 1}]}}`, `{"a": 1}`, 0},
		{"setUnion", `{"$setUnion": ["$arr", [3, 4, 4.0]]}`, `[1, 2, 3, 4]`, 0},
		{"setIntersection", `{"$setIntersection": ["$arr", [3, 1, 9]]}`, `[1, 3]`, 0},
		{"setDifference", `{"$setDifference": ["$arr", [2]]}`, `[1, 3]`, 0},
		{"setEquals", `{"$setEquals": ["$arr", [3, 2, 1, 1]]}`, `true`, 0},
		{"setIsSubset", `{"$setIsSubset": [[1], "$arr"]}`, `true`, 0},
		{"allElementsTrue", `{"$allElementsTrue": [[1, true, "x"]]}`, `true`, 0},
		{"anyElementTrue", `{"$anyElementTrue": [[0, false, null]]}`, `false`, 0},
		{"two operators", `{"$add": [1], "$subtract": [1, 2]}`, ``, 15983},
		{"lease owner expired", `{"$cond": [{"$or": [{"$lt": ["$expiresAt", "$$NOW"]}, {"$eq": ["$owner", "me"]}]}, "me", "$owner"]}`, `"me"`, 0},
	}
	root := qbDoc(t, doc)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expr := qbVal(t, tc.expr)
			got, err := Eval(expr, root, qbEnv())
			if tc.code != 0 {
				if qbCode(err) != tc.code {
					t.Fatalf("Eval(%s): want error code %d, got %v (%v)", tc.expr, tc.code, err, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval(%s): %v", tc.expr, err)
			}
			want := qbVal(t, tc.want)
			if !identical(got, want) {
				t.Fatalf("Eval(%s) = %s, want %s", tc.expr, qbJSON(got), qbJSON(want))
			}
		})
	}
}

func TestQueryEvalNilEnvUsesWallClock(t *testing.T) {
	before := time.Now().Add(-time.Second)
	v, err := Eval("$$NOW", bson.D{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := v.(bson.DateTime)
	if !ok || d.Time().Before(before) || d.Time().After(time.Now().Add(time.Second)) {
		t.Fatalf("$$NOW with nil env = %v", v)
	}
}

func TestQueryEvalArithmeticTyping(t *testing.T) {
	tests := []struct {
		a, b any
		op   string
		want any
	}{
		{int32(1), int32(2), "+", int32(3)},
		{int32(2147483647), int32(1), "+", int64(2147483648)},
		{int64(9223372036854775807), int64(1), "+", float64(9223372036854775808)},
		{int32(1), int64(2), "+", int64(3)},
		{int32(1), 0.5, "+", 1.5},
		{int32(-2147483648), int32(1), "-", int64(-2147483649)},
		{int32(65536), int32(65536), "*", int64(4294967296)},
		{int64(4294967296), int64(4294967296), "*", float64(18446744073709551616)},
	}
	for _, tc := range tests {
		got, err := arith(tc.op, tc.a, tc.b)
		if err != nil || !identical(got, tc.want) {
			t.Errorf("%v %s %v = %#v (%v), want %#v", tc.a, tc.op, tc.b, got, err, tc.want)
		}
	}
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	decTests := []struct {
		a, b any
		op   string
		want string
	}{
		{dec("1.5"), int32(1), "+", "2.5"},
		{dec("0.1"), 0.2, "+", "0.3"},
		{int64(10), dec("0.25"), "-", "9.75"},
		{dec("1.5"), int32(2), "*", "3.0"},
		{dec("9999999999999999999999999999999999"), int32(1), "+", "1.000000000000000000000000000000000E+34"},
	}
	for _, tc := range decTests {
		got, err := arith(tc.op, tc.a, tc.b)
		d, ok := got.(bson.Decimal128)
		if err != nil || !ok || d.String() != tc.want {
			t.Errorf("%v %s %v = %v (%v), want decimal %s", tc.a, tc.op, tc.b, got, err, tc.want)
		}
	}
	if _, err := arith("+", dec("NaN"), int32(1)); qbCode(err) != 9000001 {
		t.Errorf("decimal NaN arithmetic: want unsupported error, got %v", err)
	}
}
