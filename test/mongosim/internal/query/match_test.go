package query

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type qaMatchCase struct {
	filter, doc string
	want        bool
}

func runMatchCases(t *testing.T, cases []qaMatchCase) {
	t.Helper()
	for _, c := range cases {
		f, d := qaDoc(t, c.filter), qaDoc(t, c.doc)
		got, err := Match(f, d, nil)
		if err != nil {
			t.Errorf("Match(%s, %s): %v", c.filter, c.doc, err)
			continue
		}
		if got != c.want {
			t.Errorf("Match(%s, %s) = %v, want %v", c.filter, c.doc, got, c.want)
		}
	}
}

func TestQueryMatchEquality(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{}`, `{"a":1}`, true},
		{`{"a":1}`, `{"a":1}`, true},
		{`{"a":1}`, `{"a":1.0}`, true},
		{`{"a":1}`, `{"a":{"$numberLong":"1"}}`, true},
		{`{"a":1}`, `{"a":{"$numberDecimal":"1.00"}}`, true},
		{`{"a":1}`, `{"a":"1"}`, false},
		{`{"a":1}`, `{"b":1}`, false},
		{`{"a":1}`, `{"a":[1,2]}`, true},
		{`{"a":1}`, `{"a":[[1],2]}`, false},
		{`{"a":[1,2]}`, `{"a":[1,2]}`, true},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{`{"a":[1,2]}`, `{"a":[[1,2],3]}`, true},
		{`{"a":[1]}`, `{"a":1}`, false},
		{`{"a":[]}`, `{"a":[]}`, true},
		{`{"a":[]}`, `{"a":[[]]}`, true},
		{`{"a":{"b":1}}`, `{"a":{"b":1}}`, true},
		{`{"a":{"b":1}}`, `{"a":{"b":1,"c":2}}`, false},
		{`{"a":{"b":1,"c":2}}`, `{"a":{"c":2,"b":1}}`, false},
		{`{"a":{"b":1}}`, `{"a":[{"b":1}]}`, true},
		{`{"a":1,"b":2}`, `{"a":1,"b":2}`, true},
		{`{"a":1,"b":2}`, `{"a":1,"b":3}`, false},
		{`{"a":{"$eq":1}}`, `{"a":[3,1]}`, true},
		{`{"a":{"$eq":[1]}}`, `{"a":[1]}`, true},
		{`{"a":{"$eq":{"$regularExpression":{"pattern":"x","options":""}}}}`, `{"a":"x"}`, false},
		{`{"a":{"$eq":{"$regularExpression":{"pattern":"x","options":""}}}}`, `{"a":{"$regularExpression":{"pattern":"x","options":""}}}`, true},
		{`{"a":{"$ref":"c","$id":1}}`, `{"a":{"$ref":"c","$id":1}}`, true},
		{`{"a":{}}`, `{"a":{}}`, true},
		{`{"a":{}}`, `{"a":{"b":1}}`, false},
		{`{"a":true}`, `{"a":1}`, false},
		{`{"a":{"$numberDecimal":"NaN"}}`, `{"a":{"$numberDouble":"NaN"}}`, true},
	})
}

func TestQueryMatchNull(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":null}`, `{}`, true},
		{`{"a":null}`, `{"a":null}`, true},
		{`{"a":null}`, `{"a":{"$undefined":true}}`, true},
		{`{"a":null}`, `{"a":0}`, false},
		{`{"a":null}`, `{"a":[]}`, false},
		{`{"a":null}`, `{"a":[1,null]}`, true},
		{`{"a.b":null}`, `{"a":1}`, true},
		{`{"a.b":null}`, `{"a":{"c":1}}`, true},
		{`{"a.b":null}`, `{"a":[{"c":1}]}`, true},
		{`{"a.b":null}`, `{"a":[{"b":1}]}`, false},
		{`{"a.b":null}`, `{"a":[1,2]}`, false},
		{`{"a.b":null}`, `{"a":[]}`, false},
		{`{"a":{"$ne":null}}`, `{}`, false},
		{`{"a":{"$ne":null}}`, `{"a":1}`, true},
		{`{"a":{"$gte":null}}`, `{}`, true},
		{`{"a":{"$lte":null}}`, `{"a":null}`, true},
		{`{"a":{"$gt":null}}`, `{"a":null}`, false},
		{`{"a":{"$lt":null}}`, `{}`, false},
		{`{"a":{"$in":[null]}}`, `{}`, true},
		{`{"a":{"$in":[null, 5]}}`, `{"a":5}`, true},
		{`{"a":{"$nin":[null]}}`, `{}`, false},
		{`{"a":{"$nin":[null]}}`, `{"a":3}`, true},
	})
}

func TestQueryMatchComparison(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":{"$gt":1}}`, `{"a":2}`, true},
		{`{"a":{"$gt":1}}`, `{"a":1}`, false},
		{`{"a":{"$gte":1}}`, `{"a":1.0}`, true},
		{`{"a":{"$lt":1}}`, `{"a":0.5}`, true},
		{`{"a":{"$lte":1}}`, `{"a":{"$numberLong":"2"}}`, false},
		{`{"a":{"$gt":1}}`, `{"a":"2"}`, false},
		{`{"a":{"$lt":"b"}}`, `{"a":1}`, false},
		{`{"a":{"$lt":"b"}}`, `{"a":"a"}`, true},
		{`{"a":{"$lt":"b"}}`, `{"a":"B"}`, true},
		{`{"a":{"$gt":1}}`, `{"a":[0,5]}`, true},
		{`{"a":{"$gt":1}}`, `{"a":[0,1]}`, false},
		{`{"a":{"$gt":1,"$lt":3}}`, `{"a":[0,5]}`, true}, // each bound satisfied by some element
		{`{"a":{"$gt":1,"$lt":3}}`, `{"a":[5,6]}`, false},
		{`{"a":{"$gt":1}}`, `{}`, false},
		{`{"a":{"$gt":{"$minKey":1}}}`, `{"a":"x"}`, true},
		{`{"a":{"$gt":{"$minKey":1}}}`, `{"a":null}`, true},
		{`{"a":{"$lt":{"$maxKey":1}}}`, `{"a":{"b":1}}`, true},
		{`{"a":{"$gt":{"$maxKey":1}}}`, `{"a":1}`, false},
		{`{"a":{"$gt":{"$numberDouble":"NaN"}}}`, `{"a":1}`, false},
		{`{"a":{"$lt":1}}`, `{"a":{"$numberDouble":"NaN"}}`, false},
		{`{"a":{"$gte":{"$numberDouble":"NaN"}}}`, `{"a":{"$numberDouble":"NaN"}}`, true},
		{`{"a":{"$ne":{"$numberDouble":"NaN"}}}`, `{"a":1}`, true},
		{`{"a":{"$gt":{"$date":"2020-01-01T00:00:00Z"}}}`, `{"a":{"$date":"2021-01-01T00:00:00Z"}}`, true},
		{`{"a":{"$gt":{"$date":"2020-01-01T00:00:00Z"}}}`, `{"a":{"$timestamp":{"t":2000000000,"i":1}}}`, false},
		{`{"a":{"$gt":[1]}}`, `{"a":[2]}`, true},
		{`{"a":{"$gt":{"b":1}}}`, `{"a":{"b":2}}`, true},
		{`{"a":{"$lt":{"$numberDecimal":"1.5"}}}`, `{"a":1}`, true},
		{`{"a":{"$gt":{"$numberLong":"9007199254740992"}}}`, `{"a":{"$numberLong":"9007199254740993"}}`, true},
		{`{"a":{"$gt":9007199254740992.0}}`, `{"a":{"$numberLong":"9007199254740993"}}`, true},
		{`{"a":{"$ne":1}}`, `{"a":[1,2]}`, false},
		{`{"a":{"$ne":1}}`, `{"a":[2,3]}`, true},
		{`{"a":{"$ne":1}}`, `{}`, true},
		{`{"a":{"$ne":[1,2]}}`, `{"a":[1,2]}`, false},
	})
}

func TestQueryMatchInNin(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":{"$in":[1,2]}}`, `{"a":2}`, true},
		{`{"a":{"$in":[1,2]}}`, `{"a":3}`, false},
		{`{"a":{"$in":[1,2]}}`, `{"a":[3,2]}`, true},
		{`{"a":{"$in":[[1,2]]}}`, `{"a":[1,2]}`, true},
		{`{"a":{"$in":[]}}`, `{"a":1}`, false},
		{`{"a":{"$in":[{"$regularExpression":{"pattern":"^ab","options":""}}]}}`, `{"a":"abc"}`, true},
		{`{"a":{"$in":[{"$regularExpression":{"pattern":"^ab","options":""}}]}}`, `{"a":"xabc"}`, false},
		{`{"a":{"$in":[{"$regularExpression":{"pattern":"^AB","options":"i"}}, 5]}}`, `{"a":["q","abc"]}`, true},
		{`{"a":{"$in":[1]}}`, `{"a":1.0}`, true},
		{`{"a":{"$nin":[1,2]}}`, `{"a":3}`, true},
		{`{"a":{"$nin":[1,2]}}`, `{"a":[3,1]}`, false},
		{`{"a":{"$nin":[1,2]}}`, `{}`, true},
		{`{"a":{"$nin":[{"$regularExpression":{"pattern":"b","options":""}}]}}`, `{"a":"abc"}`, false},
		{`{"a.b":{"$in":[1]}}`, `{"a":[{"b":2},{"b":1}]}`, true},
	})
}

func TestQueryMatchExistsType(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":{"$exists":true}}`, `{"a":null}`, true},
		{`{"a":{"$exists":true}}`, `{}`, false},
		{`{"a":{"$exists":false}}`, `{}`, true},
		{`{"a":{"$exists":0}}`, `{"a":1}`, false},
		{`{"a":{"$exists":1}}`, `{"a":[]}`, true},
		{`{"a.b":{"$exists":true}}`, `{"a":[{"c":1},{"b":null}]}`, true},
		{`{"a.b":{"$exists":true}}`, `{"a":[{"c":1}]}`, false},
		{`{"a.b":{"$exists":false}}`, `{"a":[1,2]}`, true},
		{`{"a.1":{"$exists":true}}`, `{"a":[5,6]}`, true},
		{`{"a.2":{"$exists":true}}`, `{"a":[5,6]}`, false},
		{`{"a":{"$type":"string"}}`, `{"a":"x"}`, true},
		{`{"a":{"$type":2}}`, `{"a":"x"}`, true},
		{`{"a":{"$type":2.0}}`, `{"a":1}`, false},
		{`{"a":{"$type":"number"}}`, `{"a":{"$numberDecimal":"1"}}`, true},
		{`{"a":{"$type":"number"}}`, `{"a":"1"}`, false},
		{`{"a":{"$type":"int"}}`, `{"a":[1.5, 2]}`, true},
		{`{"a":{"$type":"long"}}`, `{"a":2}`, false},
		{`{"a":{"$type":"array"}}`, `{"a":[]}`, true},
		{`{"a":{"$type":"array"}}`, `{"a":{"b":[]}}`, false},
		{`{"a":{"$type":"object"}}`, `{"a":[{"b":1}]}`, true},
		{`{"a":{"$type":"null"}}`, `{}`, false},
		{`{"a":{"$type":"null"}}`, `{"a":null}`, true},
		{`{"a":{"$type":["string","bool"]}}`, `{"a":true}`, true},
		{`{"a":{"$type":"minKey"}}`, `{"a":{"$minKey":1}}`, true},
		{`{"a":{"$type":"objectId"}}`, `{"a":{"$oid":"65a000000000000000000002"}}`, true},
		{`{"a":{"$type":"date"}}`, `{"a":{"$date":"2020-01-01T00:00:00Z"}}`, true},
		{`{"a":{"$type":"regex"}}`, `{"a":{"$regularExpression":{"pattern":"x","options":""}}}`, true},
		{`{"a":{"$type":"binData"}}`, `{"a":{"$binary":{"base64":"AA==","subType":"04"}}}`, true},
	})
}

func TestQueryMatchLogical(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"$and":[{"a":1},{"b":2}]}`, `{"a":1,"b":2}`, true},
		{`{"$and":[{"a":1},{"b":2}]}`, `{"a":1,"b":3}`, false},
		{`{"$or":[{"a":1},{"b":2}]}`, `{"a":0,"b":2}`, true},
		{`{"$or":[{"a":1},{"b":2}]}`, `{"a":0,"b":0}`, false},
		{`{"$nor":[{"a":1},{"b":2}]}`, `{"a":0,"b":0}`, true},
		{`{"$nor":[{"a":1},{"b":2}]}`, `{"a":1}`, false},
		{`{"$or":[{}]}`, `{"a":1}`, true},
		{`{"a":1,"$or":[{"b":1},{"c":1}]}`, `{"a":1,"c":1}`, true},
		{`{"a":1,"$or":[{"b":1},{"c":1}]}`, `{"a":2,"c":1}`, false},
		{`{"a":{"$not":{"$gt":5}}}`, `{"a":3}`, true},
		{`{"a":{"$not":{"$gt":5}}}`, `{"a":7}`, false},
		{`{"a":{"$not":{"$gt":5}}}`, `{}`, true},
		{`{"a":{"$not":{"$gt":5}}}`, `{"a":[1,7]}`, false},
		{`{"a":{"$not":{"$gt":1,"$lt":5}}}`, `{"a":[0,9]}`, false},
		{`{"a":{"$not":{"$gt":1,"$lt":5}}}`, `{"a":9}`, true},
		{`{"a":{"$not":{"$regularExpression":{"pattern":"^a","options":""}}}}`, `{"a":"abc"}`, false},
		{`{"a":{"$not":{"$regularExpression":{"pattern":"^a","options":""}}}}`, `{"a":"bc"}`, true},
		{`{"a":{"$not":{"$regex":"^a"}}}`, `{"a":"bc"}`, true},
		{`{"a":{"$not":{"$in":[1]}}}`, `{"a":2}`, true},
		{`{"$comment":"hi","a":1}`, `{"a":1}`, true},
		{`{"$alwaysFalse":1}`, `{"a":1}`, false},
		{`{"$alwaysTrue":1}`, `{"a":1}`, true},
	})
}

func TestQueryMatchRegex(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":{"$regularExpression":{"pattern":"^b","options":""}}}`, `{"a":"bob"}`, true},
		{`{"a":{"$regularExpression":{"pattern":"^b","options":""}}}`, `{"a":"Bob"}`, false},
		{`{"a":{"$regularExpression":{"pattern":"^b","options":"i"}}}`, `{"a":"Bob"}`, true},
		{`{"a":{"$regex":"^b","$options":"i"}}`, `{"a":"Bob"}`, true},
		{`{"a":{"$regex":{"$regularExpression":{"pattern":"^b","options":"i"}}}}`, `{"a":"Bob"}`, true},
		{`{"a":{"$regex":"o"}}`, `{"a":["x","foo"]}`, true},
		{`{"a":{"$regex":"1"}}`, `{"a":1}`, false},
		{`{"a":{"$regex":"x"}}`, `{}`, false},
		{`{"a":{"$regex":"^b$"}}`, `{"a":"a\nb"}`, false},
		{`{"a":{"$regex":"^b$","$options":"m"}}`, `{"a":"a\nb\nc"}`, true},
		{`{"a":{"$regex":"a.b"}}`, `{"a":"a\nb"}`, false},
		{`{"a":{"$regex":"a.b","$options":"s"}}`, `{"a":"a\nb"}`, true},
		{`{"a":{"$regex":"a b # comment\n c","$options":"x"}}`, `{"a":"abc"}`, true},
		{`{"a":{"$regex":"a[ ]b","$options":"x"}}`, `{"a":"a b"}`, true},
		{`{"a":{"$regex":"b$"}}`, `{"a":"ab\n"}`, true},
		{`{"a":{"$regex":"b$"}}`, `{"a":"ab\nc"}`, false},
		{`{"a":{"$regex":"(?m)^b$"}}`, `{"a":"a\nb\nc"}`, true},
		{`{"a":{"$regex":"^\\$b"}}`, `{"a":"$b"}`, true},
		{`{"a":{"$regex":"b\\Z"}}`, `{"a":"ab\n"}`, true},
		{`{"a":{"$regex":"[]a]"}}`, `{"a":"]"}`, true},
		{`{"a":{"$regex":"a\\ b","$options":"x"}}`, `{"a":"a b"}`, true},
		{`{"a":{"$regex":"\\é"}}`, `{"a":"é"}`, true},
		{`{"a":{"$regex":"\\d+\\.\\d"}}`, `{"a":"v12.5"}`, true},
		{`{"a":{"$regex":"[$]"}}`, `{"a":"$"}`, true},
		{`{"a":{"$regex":"x"}}`, `{"a":{"$symbol":"axb"}}`, true},
		{`{"a":{"$regularExpression":{"pattern":"x","options":"i"}}}`, `{"a":{"$regularExpression":{"pattern":"x","options":"i"}}}`, true},
		{`{"a.b":{"$regex":"^z"}}`, `{"a":[{"b":"y"},{"b":"zed"}]}`, true},
	})
}

func TestQueryMatchArrays(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":{"$all":[1,2]}}`, `{"a":[2,3,1]}`, true},
		{`{"a":{"$all":[1,2]}}`, `{"a":[2,3]}`, false},
		{`{"a":{"$all":[1]}}`, `{"a":1}`, true},
		{`{"a":{"$all":[]}}`, `{"a":[]}`, false},
		{`{"a":{"$all":[[1,2]]}}`, `{"a":[[1,2],3]}`, true},
		{`{"a":{"$all":[{"$regularExpression":{"pattern":"^x","options":""}}, "yy"]}}`, `{"a":["xa","yy"]}`, true},
		{`{"a":{"$all":[{"$elemMatch":{"b":1}},{"$elemMatch":{"c":2}}]}}`, `{"a":[{"b":1},{"c":2}]}`, true},
		{`{"a":{"$all":[{"$elemMatch":{"b":1}},{"$elemMatch":{"c":2}}]}}`, `{"a":[{"b":1}]}`, false},
		{`{"a":{"$size":2}}`, `{"a":[1,[2,3]]}`, true},
		{`{"a":{"$size":0}}`, `{"a":[]}`, true},
		{`{"a":{"$size":1}}`, `{"a":[[1,2]]}`, true},
		{`{"a":{"$size":2}}`, `{"a":[[1,2]]}`, false},
		{`{"a":{"$size":1}}`, `{"a":1}`, false},
		{`{"a":{"$size":0}}`, `{}`, false},
		{`{"a.b":{"$size":1}}`, `{"a":[{"b":[1]},{"b":[1,2]}]}`, true},
		{`{"a":{"$elemMatch":{"$gt":1,"$lt":3}}}`, `{"a":[0,5,2]}`, true},
		{`{"a":{"$elemMatch":{"$gt":1,"$lt":3}}}`, `{"a":[0,5]}`, false},
		{`{"a":{"$elemMatch":{"$gt":1}}}`, `{"a":5}`, false},
		{`{"a":{"$elemMatch":{"$gt":1}}}`, `{"a":[[5]]}`, false},
		{`{"a":{"$elemMatch":{"$ne":1}}}`, `{"a":[1,1]}`, false},
		{`{"a":{"$elemMatch":{"$ne":1}}}`, `{"a":[1,2]}`, true},
		{`{"a":{"$elemMatch":{"$not":{"$gt":1}}}}`, `{"a":[5,0]}`, true},
		{`{"a":{"$elemMatch":{"$in":[7]}}}`, `{"a":[5,7]}`, true},
		{`{"a":{"$elemMatch":{"$regex":"^x"}}}`, `{"a":["ax","xa"]}`, true},
		{`{"a":{"$elemMatch":{"b":1,"c":2}}}`, `{"a":[{"b":1,"c":2}]}`, true},
		{`{"a":{"$elemMatch":{"b":1,"c":2}}}`, `{"a":[{"b":1},{"c":2}]}`, false},
		{`{"a":{"$elemMatch":{"b":{"$gt":1}}}}`, `{"a":[{"b":[0,5]}]}`, true},
		{`{"a":{"$elemMatch":{"$or":[{"b":1},{"c":1}]}}}`, `{"a":[{"c":1}]}`, true},
		{`{"a":{"$elemMatch":{}}}`, `{"a":[1,{"b":1}]}`, true},
		{`{"a":{"$elemMatch":{}}}`, `{"a":[1,2]}`, false},
		{`{"a":{"$elemMatch":{"b":null}}}`, `{"a":[{"c":1}]}`, true},
		{`{"a.b":{"$elemMatch":{"$eq":2}}}`, `{"a":[{"b":[1]},{"b":[2]}]}`, true},
		{`{"a":{"$elemMatch":{"$elemMatch":{"$eq":2}}}}`, `{"a":[[1],[2]]}`, true},
		{`{"a":{"$mod":[4,1]}}`, `{"a":5}`, true},
		{`{"a":{"$mod":[4,1]}}`, `{"a":6}`, false},
		{`{"a":{"$mod":[4,1]}}`, `{"a":5.9}`, true},
		{`{"a":{"$mod":[4,-1]}}`, `{"a":-5}`, true},
		{`{"a":{"$mod":[4,1]}}`, `{"a":[2,9]}`, true},
		{`{"a":{"$mod":[4,1]}}`, `{"a":"5"}`, false},
		{`{"a":{"$mod":[4,1]}}`, `{"a":{"$numberDouble":"NaN"}}`, false},
		{`{"a":{"$mod":[{"$numberDecimal":"4"},1]}}`, `{"a":{"$numberDecimal":"9"}}`, true},
	})
}

func TestQueryMatchPaths(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a.b":1}`, `{"a":{"b":1}}`, true},
		{`{"a.b.c":1}`, `{"a":{"b":{"c":1}}}`, true},
		{`{"a.b":1}`, `{"a":[{"b":2},{"b":1}]}`, true},
		{`{"a.b":1}`, `{"a":[{"b":[0,1]}]}`, true},
		{`{"a.b.c":1}`, `{"a":[{"b":[{"c":1}]}]}`, true},
		{`{"a.b":1}`, `{"a":[[{"b":1}]]}`, false},
		{`{"a.0":1}`, `{"a":[1,2]}`, true},
		{`{"a.1":1}`, `{"a":[1,2]}`, false},
		{`{"a.0":1}`, `{"a":{"0":1}}`, true},
		{`{"a.0":1}`, `{"a":[{"0":1}]}`, true},
		{`{"a.0.b":1}`, `{"a":[{"b":1}]}`, true},
		{`{"a.1.b":1}`, `{"a":[{"b":1},{"b":2}]}`, false},
		{`{"a.1.b":2}`, `{"a":[{"b":1},{"b":2}]}`, true},
		{`{"a.0":[1,2]}`, `{"a":[[1,2]]}`, true},
		{`{"a.0":1}`, `{"a":[[1,2]]}`, false},
		{`{"a.00":1}`, `{"a":[1]}`, false},
		{`{"a.b":{"$gt":2}}`, `{"a":[{"b":1},{"b":3}]}`, true},
		{`{"a.b":{"$gt":2}}`, `{"a":{"b":[1,3]}}`, true},
		{`{"a.b":2}`, `{"a":5}`, false},
	})
}

func TestQueryMatchErrors(t *testing.T) {
	cases := []struct {
		filter string
		code   int32
		msg    string
	}{
		{`{"a":{"$foo":1}}`, 2, "unknown operator: $foo"},
		{`{"$foo":1}`, 2, "unknown top level operator: $foo"},
		{`{"$where":"this.a == 1"}`, 2, "$where is not supported"},
		{`{"$text":{"$search":"x"}}`, 2, "$text is not supported"},
		{`{"a":{"$near":[0,0]}}`, 2, "$near is not supported"},
		{`{"a":{"$gt":1,"b":1}}`, 2, "unknown operator: b"},
		{`{"$and":[]}`, 2, "$and must be a nonempty array"},
		{`{"$or":{"a":1}}`, 2, "$or must be a nonempty array"},
		{`{"$nor":[1]}`, 2, "entries need to be full objects"},
		{`{"a":{"$in":1}}`, 2, "$in needs an array"},
		{`{"a":{"$nin":{"x":1}}}`, 2, "$nin needs an array"},
		{`{"a":{"$in":[{"$gt":1}]}}`, 2, "cannot nest $ under $in"},
		{`{"a":{"$all":1}}`, 2, "$all needs an array"},
		{`{"a":{"$all":[{"$gt":1}]}}`, 2, "no $ expressions in $all"},
		{`{"a":{"$size":-1}}`, 2, "$size may not be negative"},
		{`{"a":{"$size":1.5}}`, 2, "$size must be a whole number"},
		{`{"a":{"$size":"1"}}`, 2, "$size needs a number"},
		{`{"a":{"$mod":[0,1]}}`, 2, "divisor cannot be 0"},
		{`{"a":{"$mod":[1]}}`, 2, "not enough elements"},
		{`{"a":{"$mod":[1,2,3]}}`, 2, "too many elements"},
		{`{"a":{"$mod":1}}`, 2, "needs to be an array"},
		{`{"a":{"$type":"foo"}}`, 2, "Unknown type name alias: foo"},
		{`{"a":{"$type":100}}`, 2, "Invalid numerical type code"},
		{`{"a":{"$type":[]}}`, 9, "at least one type"},
		{`{"a":{"$not":{}}}`, 2, "$not cannot be empty"},
		{`{"a":{"$not":1}}`, 2, "$not needs a regex or a document"},
		{`{"a":{"$elemMatch":1}}`, 2, "$elemMatch needs an Object"},
		{`{"a":{"$elemMatch":{"$where":"x"}}}`, 2, "$where"},
		{`{"a":{"$options":"i"}}`, 2, "$options needs a $regex"},
		{`{"a":{"$regex":1}}`, 2, "$regex has to be a string"},
		{`{"a":{"$regex":"x","$options":"z"}}`, 51108, "invalid flag in regex options: z"},
		{`{"a":{"$regex":{"$regularExpression":{"pattern":"x","options":"i"}},"$options":"m"}}`, 51075, "options set in both"},
		{`{"a":{"$regex":"("}}`, 51091, "Regular expression is invalid"},
		{`{"a":{"$regex":"a(?=b)"}}`, 2, "does not support"},
		{`{"a":{"$regex":"(a)\\1"}}`, 2, "does not support"},
		{`{"$alwaysTrue":2}`, 9, "$alwaysTrue"},
	}
	for _, c := range cases {
		_, err := CompileFilter(qaDoc(t, c.filter))
		qe, ok := err.(*Error)
		if !ok {
			t.Errorf("CompileFilter(%s) error = %v, want *Error", c.filter, err)
			continue
		}
		if qe.Code != c.code || !strings.Contains(qe.Msg, c.msg) {
			t.Errorf("CompileFilter(%s) = {%d %q}, want code %d containing %q", c.filter, qe.Code, qe.Msg, c.code, c.msg)
		}
	}
}

func TestQueryMatchExpr(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"$expr":{"$gt":["$a","$b"]}}`, `{"a":2,"b":1}`, true},
		{`{"$expr":{"$gt":["$a","$b"]}}`, `{"a":1,"b":2}`, false},
		{`{"$expr":"$a"}`, `{"a":0}`, false},
		{`{"$expr":"$a"}`, `{"a":""}`, true},
		{`{"$expr":"$a"}`, `{}`, false},
		{`{"$expr":{"$eq":["$a.b",1]},"c":1}`, `{"a":{"b":1},"c":1}`, true},
		{`{"$or":[{"$expr":{"$eq":["$a",5]}},{"b":1}]}`, `{"a":5}`, true},
	})
	_, err := CompileFilter(qaDoc(t, `{"$or":[{"a":1},{"$expr":{"$nosuchop":1}}]}`))
	if qe, ok := err.(*Error); !ok || qe.Code != 168 {
		t.Errorf("unknown expression operator must fail to compile with 168, got %v", err)
	}
	_, err = Match(qaDoc(t, `{"$expr":{"$divide":["$a",0]}}`), qaDoc(t, `{"a":1}`), nil)
	if err == nil {
		t.Error("run-time expression errors must be returned")
	}
}

func TestQueryFilterReuseConcurrent(t *testing.T) {
	f, err := CompileFilter(qaDoc(t, `{"a.b":{"$in":[1,{"$regularExpression":{"pattern":"^x","options":""}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	docs := []bson.D{qaDoc(t, `{"a":[{"b":1}]}`), qaDoc(t, `{"a":{"b":"xy"}}`), qaDoc(t, `{"a":{"b":2}}`)}
	want := []bool{true, true, false}
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 100; i++ {
				for j, d := range docs {
					if ok, _ := f.Match(d, nil); ok != want[j] {
						t.Errorf("doc %d: got %v", j, ok)
					}
				}
			}
			done <- true
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	var nilFilter *Filter
	if ok, _ := nilFilter.Match(docs[0], nil); !ok {
		t.Error("nil filter must match everything")
	}
}

func TestQueryEqualityFields(t *testing.T) {
	cases := []struct{ filter, want string }{
		{`{}`, `{}`},
		{`{"a":1}`, `{"a":1}`},
		{`{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`},
		{`{"b":2,"_id":7}`, `{"_id":7,"b":2}`},
		{`{"a.b":1,"a.c":2,"d":3}`, `{"a":{"b":1,"c":2},"d":3}`},
		{`{"x":1,"_id.k":5}`, `{"_id":{"k":5},"x":1}`},
		{`{"a":{"$eq":[1,2]}}`, `{"a":[1,2]}`},
		{`{"a":{"b":1}}`, `{"a":{"b":1}}`},
		{`{"$and":[{"a":1},{"$and":[{"b":2}]}]}`, `{"a":1,"b":2}`},
		{`{"$or":[{"a":1}]}`, `{"a":1}`},
		{`{"$or":[{"a":1},{"b":2}]}`, `{}`},
		{`{"$or":[{"_id":1},{"_id":1}]}`, `{"_id":1}`},
		{`{"_id":1,"$and":[{"c":1},{"d":1}],"a":12}`, `{"_id":1,"c":1,"d":1,"a":12}`},
		{`{"$and":[{"c":1},{"$or":[{"x":1}]}],"$or":[{"x":1},{"x":2}]}`, `{"c":1,"x":1}`},
		{`{"x.x":{"$eq":1},"x.y.z":1}`, `{"x":{"x":1,"y":{"z":1}}}`},
		{`{"x":{"$eq":{"$gt":5}}}`, `{"x":{"$gt":5}}`},
		{`{"a":{"$in":[5]}}`, `{"a":5}`},
		{`{"a":{"$in":[5,6]}}`, `{}`},
		{`{"a":{"$all":[5]}}`, `{"a":5}`},
		{`{"a":{"$gt":1},"b":{"$regularExpression":{"pattern":"x","options":""}}}`, `{}`},
		{`{"a":{"$elemMatch":{"b":1}}}`, `{}`},
		{`{"a":{"$gt":1,"$eq":3}}`, `{"a":3}`},
		{`{"$expr":{"$eq":["$a",1]},"c":null}`, `{"c":null}`},
		{`{"a":{"$ne":1},"$comment":"x","b":{"$exists":true}}`, `{}`},
	}
	for _, c := range cases {
		got, err := EqualityFields(qaDoc(t, c.filter))
		if err != nil {
			t.Errorf("EqualityFields(%s): %v", c.filter, err)
			continue
		}
		want := qaDoc(t, c.want)
		if HashKey(got) != HashKey(want) || len(got) != len(want) {
			t.Errorf("EqualityFields(%s) = %v, want %v", c.filter, got, want)
		}
	}
	for _, f := range []string{
		`{"a":1,"$and":[{"a":2}]}`,
		`{"a":1,"a.b":2}`,
		`{"a.b.c":1,"a.b":2}`,
		`{"a":{"$all":[1,2]}}`,
		`{"a":{"$eq":1,"$in":[1]}}`,
		`{"a.b":1,"a":{"a":1,"b":1}}`,
		`{"a":{},"a.c":2}`,
		`{"c":2,"$and":[{"c":1},{"d":1}]}`,
	} {
		_, err := EqualityFields(qaDoc(t, f))
		if qe, ok := err.(*Error); !ok || qe.Code != 54 {
			t.Errorf("EqualityFields(%s) error = %v, want code 54", f, err)
		}
	}
	if _, err := EqualityFields(qaDoc(t, `{"a":{"$bogus":1}}`)); err == nil {
		t.Error("invalid filters must be rejected")
	}
}

func TestQueryMatchBits(t *testing.T) {
	runMatchCases(t, []qaMatchCase{
		{`{"a":{"$bitsAllSet":5}}`, `{"a":7}`, true},
		{`{"a":{"$bitsAllSet":5}}`, `{"a":6}`, false},
		{`{"a":{"$bitsAllSet":[0,2]}}`, `{"a":{"$numberLong":"5"}}`, true},
		{`{"a":{"$bitsAnySet":[1,3]}}`, `{"a":8}`, true},
		{`{"a":{"$bitsAnySet":[1,3]}}`, `{"a":5}`, false},
		{`{"a":{"$bitsAllClear":[1,3]}}`, `{"a":5}`, true},
		{`{"a":{"$bitsAnyClear":[0,2]}}`, `{"a":5}`, false},
		{`{"a":{"$bitsAllSet":[70]}}`, `{"a":-1}`, true},
		{`{"a":{"$bitsAllSet":[70]}}`, `{"a":1}`, false},
		{`{"a":{"$bitsAllSet":1}}`, `{"a":1.5}`, false},
		{`{"a":{"$bitsAllSet":1}}`, `{"a":3.0}`, true},
		{`{"a":{"$bitsAllSet":1}}`, `{"a":"1"}`, false},
		{`{"a":{"$bitsAllSet":[]}}`, `{"a":0}`, true},
		{`{"a":{"$bitsAnySet":[]}}`, `{"a":255}`, false},
		{`{"a":{"$bitsAllSet":{"$binary":{"base64":"AQI=","subType":"00"}}}}`, `{"a":513}`, true},
		{`{"a":{"$bitsAllSet":[9]}}`, `{"a":{"$binary":{"base64":"AQI=","subType":"00"}}}`, true},
		{`{"a":{"$bitsAllSet":[1]}}`, `{"a":{"$binary":{"base64":"AQI=","subType":"00"}}}`, false},
		{`{"a":{"$bitsAnySet":2}}`, `{"a":[1,2]}`, true},
	})
	for _, f := range []string{`{"a":{"$bitsAllSet":-1}}`, `{"a":{"$bitsAllSet":[-1]}}`, `{"a":{"$bitsAllSet":"x"}}`, `{"a":{"$bitsAnySet":1.5}}`} {
		if _, err := CompileFilter(qaDoc(t, f)); err == nil {
			t.Errorf("CompileFilter(%s) must fail", f)
		}
	}
}

// TestQueryMatchNullSemanticsDataset checks null/missing semantics over
// nested paths and arrays against the outcomes the server documents for
// the same data set (undefined values left out: see TypeOrder).
func TestQueryMatchNullSemanticsDataset(t *testing.T) {
	docs := []string{
		`{"_id":"a_empty_subobject","a":{}}`,
		`{"_id":"a_null","a":null}`,
		`{"_id":"a_number","a":4}`,
		`{"_id":"a_subobject_b_not_null","a":{"b":"hi"}}`,
		`{"_id":"a_subobject_b_null","a":{"b":null}}`,
		`{"_id":"no_a"}`,
		`{"_id":"a_double_array","a":[[]]}`,
		`{"_id":"a_empty_array","a":[]}`,
		`{"_id":"a_object_array_no_b_nulls","a":[{"b":1},{"b":3},{"b":"string"}]}`,
		`{"_id":"a_object_array_some_b_nulls","a":[{"b":null},{"b":3},{"b":null}]}`,
		`{"_id":"a_object_array_some_b_missing","a":[{"b":3},{}]}`,
		`{"_id":"a_value_array_all_nulls","a":[null,null]}`,
		`{"_id":"a_value_array_no_nulls","a":[1,"string",4]}`,
		`{"_id":"a_value_array_with_null","a":[1,"string",null,4]}`,
	}
	cases := []struct{ filter, want string }{
		{`{"a":{"$eq":null}}`, "a_null,no_a,a_value_array_all_nulls,a_value_array_with_null"},
		{`{"a":{"$in":[null,75]}}`, "a_null,no_a,a_value_array_all_nulls,a_value_array_with_null"},
		{`{"a":{"$nin":[null,[]]}}`, "a_empty_subobject,a_number,a_subobject_b_not_null,a_subobject_b_null,a_object_array_no_b_nulls,a_object_array_some_b_nulls,a_object_array_some_b_missing,a_value_array_no_nulls"},
		{`{"a":{"$exists":false}}`, "no_a"},
		{`{"a":{"$elemMatch":{"$eq":null}}}`, "a_value_array_all_nulls,a_value_array_with_null"},
		{`{"a":{"$elemMatch":{"$ne":null}}}`, "a_double_array,a_object_array_no_b_nulls,a_object_array_some_b_nulls,a_object_array_some_b_missing,a_value_array_no_nulls,a_value_array_with_null"},
		{`{"a.b":{"$eq":null}}`, "a_empty_subobject,a_null,a_number,a_subobject_b_null,no_a,a_object_array_some_b_nulls,a_object_array_some_b_missing"},
		{`{"a.b":{"$ne":null}}`, "a_subobject_b_not_null,a_double_array,a_empty_array,a_object_array_no_b_nulls,a_value_array_all_nulls,a_value_array_no_nulls,a_value_array_with_null"},
		{`{"a.b":{"$nin":[null,{"$regularExpression":{"pattern":"^str.*","options":""}}]}}`, "a_subobject_b_not_null,a_double_array,a_empty_array,a_value_array_all_nulls,a_value_array_no_nulls,a_value_array_with_null"},
		{`{"a.b":{"$elemMatch":{"$eq":null}}}`, ""},
		{`{"a":{"$elemMatch":{"b":{"$eq":null}}}}`, "a_double_array,a_object_array_some_b_nulls,a_object_array_some_b_missing"},
		{`{"a":{"$elemMatch":{"b":{"$ne":null}}}}`, "a_object_array_no_b_nulls,a_object_array_some_b_nulls,a_object_array_some_b_missing"},
		{`{"a.b":{"$exists":false}}`, "a_empty_subobject,a_null,a_number,no_a,a_double_array,a_empty_array,a_value_array_all_nulls,a_value_array_no_nulls,a_value_array_with_null"},
	}
	for _, c := range cases {
		f, err := CompileFilter(qaDoc(t, c.filter))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, s := range docs {
			d := qaDoc(t, s)
			if ok, _ := f.Match(d, nil); ok {
				got[d[0].Value.(string)] = true
			}
		}
		want := map[string]bool{}
		for _, id := range strings.Split(c.want, ",") {
			if id != "" {
				want[id] = true
			}
		}
		for id := range want {
			if !got[id] {
				t.Errorf("%s: %s should match", c.filter, id)
			}
		}
		for id := range got {
			if !want[id] {
				t.Errorf("%s: %s should not match", c.filter, id)
			}
		}
	}
}
