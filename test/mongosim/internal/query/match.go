package query

import (
	"errors"
	"math"
	"math/big"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Filter is a compiled query filter: validated once, matched many times.
// A Filter is immutable and safe for concurrent use.
type Filter struct {
	root filterNode // nil matches everything
}

// CompileFilter validates a find-style query filter and compiles it. Errors
// are *Error values with the server's code (2 BadValue for malformed or
// unknown operators, 2 for unsupported features such as $where).
func CompileFilter(filter bson.D) (*Filter, error) {
	n, err := compileAnd(filter)
	if err != nil {
		return nil, err
	}
	return &Filter{root: n}, nil
}

// Match reports whether doc matches the compiled filter. env supplies
// $$NOW etc. to $expr and may be nil. The only run-time errors come from
// $expr evaluation.
func (f *Filter) Match(doc bson.D, env *Env) (bool, error) {
	if f == nil || f.root == nil {
		return true, nil
	}
	return f.root.match(doc, env)
}

// Match compiles filter and matches doc against it; see CompileFilter.
func Match(filter bson.D, doc bson.D, env *Env) (bool, error) {
	f, err := CompileFilter(filter)
	if err != nil {
		return false, err
	}
	return f.Match(doc, env)
}

// ---- logical nodes ----

type filterNode interface {
	match(doc bson.D, env *Env) (bool, error)
}

type filterAnd []filterNode

func (n filterAnd) match(doc bson.D, env *Env) (bool, error) {
	for _, c := range n {
		ok, err := c.match(doc, env)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

type filterOr []filterNode

func (n filterOr) match(doc bson.D, env *Env) (bool, error) {
	for _, c := range n {
		ok, err := c.match(doc, env)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

type filterNor []filterNode

func (n filterNor) match(doc bson.D, env *Env) (bool, error) {
	ok, err := filterOr(n).match(doc, env)
	return !ok && err == nil, err
}

type filterConst bool

func (n filterConst) match(bson.D, *Env) (bool, error) { return bool(n), nil }

// filterPath applies an operator to the values found at a dotted path.
type filterPath struct {
	parts []string
	pred  matchOp
}

func (n *filterPath) match(doc bson.D, env *Env) (bool, error) {
	c := &pathCtx{doc: doc, parts: n.parts}
	return n.pred.onPath(c, env)
}

// filterExpr is a top-level $expr.
type filterExpr struct{ expr any }

func (n filterExpr) match(doc bson.D, env *Env) (bool, error) {
	return evalExprBool(n.expr, doc, env)
}

// truthy is the aggregation notion of truth: false, null, undefined and
// numeric zero are false; everything else (including "" and []) is true.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, bson.Undefined, bson.Null:
		return false
	case bool:
		return x
	case int32, int64, int, float64, bson.Decimal128:
		return compareNumbers(x, int32(0)) != 0
	}
	return true
}

// ---- compile: top level ----

// unsupportedTop names top-level operators that the server knows but this
// simulator does not implement.
var unsupportedTop = map[string]bool{
	"$where": true, "$text": true, "$jsonSchema": true, "$sampleRate": true,
	"$near": true, "$nearSphere": true, "$geoWithin": true, "$geoIntersects": true,
	"$isolated": true, "$atomic": true, "$search": true,
}

func compileAnd(filter bson.D) (filterNode, error) {
	var nodes filterAnd
	for _, e := range filter {
		n, err := compileElem(e)
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	switch len(nodes) {
	case 0:
		return nil, nil
	case 1:
		return nodes[0], nil
	}
	return nodes, nil
}

func compileElem(e bson.E) (filterNode, error) {
	if strings.HasPrefix(e.Key, "$") {
		switch e.Key {
		case "$and", "$or", "$nor":
			return compileLogical(e.Key, e.Value)
		case "$expr":
			// checkExpr (expr.go) rejects unknown expression operators up
			// front, as the server's parser does.
			if err := checkExpr(e.Value); err != nil {
				return nil, err
			}
			return filterExpr{expr: e.Value}, nil
		case "$comment":
			return nil, nil
		case "$alwaysTrue", "$alwaysFalse":
			if !isNumber(e.Value) || compareNumbers(e.Value, int32(1)) != 0 {
				return nil, errf(codeFailedToParse, "%s must be an integer value of 1", e.Key)
			}
			return filterConst(e.Key == "$alwaysTrue"), nil
		}
		if unsupportedTop[e.Key] {
			return nil, errf(codeBadValue, "query operator %s is not supported by mongosim", e.Key)
		}
		return nil, errf(codeBadValue, "unknown top level operator: %s. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.", e.Key)
	}
	o, err := compileFieldValue(e.Value)
	if err != nil {
		return nil, err
	}
	return &filterPath{parts: splitPath(e.Key), pred: o}, nil
}

func compileLogical(name string, v any) (filterNode, error) {
	arr, ok := v.(bson.A)
	if !ok || len(arr) == 0 {
		return nil, errf(codeBadValue, "%s must be a nonempty array", name)
	}
	nodes := make([]filterNode, 0, len(arr))
	for _, x := range arr {
		d, ok := x.(bson.D)
		if !ok {
			return nil, errf(codeBadValue, "$or/$and/$nor entries need to be full objects")
		}
		n, err := compileAnd(d)
		if err != nil {
			return nil, err
		}
		if n == nil {
			n = filterConst(true)
		}
		nodes = append(nodes, n)
	}
	switch name {
	case "$and":
		return filterAnd(nodes), nil
	case "$or":
		return filterOr(nodes), nil
	}
	return filterNor(nodes), nil
}

// isOperatorDoc reports whether v is a document of query operators: its
// first field starts with '$' and is not a DBRef field.
func isOperatorDoc(v any) (bson.D, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
		return nil, false
	}
	switch d[0].Key {
	case "$ref", "$id", "$db":
		return nil, false
	}
	return d, true
}

// compileFieldValue compiles the value of a path in a filter: an operator
// document, a regex (pattern match) or a literal (equality).
func compileFieldValue(v any) (matchOp, error) {
	if d, ok := isOperatorDoc(v); ok {
		return compileOperators(d)
	}
	if re, ok := v.(bson.Regex); ok {
		return newRegexOp(re.Pattern, re.Options)
	}
	return &matchCmp{kind: opEQ, rhs: v}, nil
}

// ---- operators ----

// matchOp is a compiled field-level operator. onPath applies it to a path of a
// document with the query language's array semantics; single applies it to
// one value (inside a value-form $elemMatch).
type matchOp interface {
	onPath(c *pathCtx, env *Env) (bool, error)
	single(v any, missing bool, env *Env) (bool, error)
}

// pathCtx caches the items a path yields in one document.
type pathCtx struct {
	doc             bson.D
	parts           []string
	expanded, plain []item
	haveE, haveP    bool
}

func (c *pathCtx) items(expand bool) []item {
	if expand {
		if !c.haveE {
			c.expanded, c.haveE = pathItems(c.doc, c.parts, true), true
		}
		return c.expanded
	}
	if !c.haveP {
		c.plain, c.haveP = pathItems(c.doc, c.parts, false), true
	}
	return c.plain
}

// anyItem reports whether o.single holds for any item of the path.
func anyItem(c *pathCtx, expand bool, o matchOp, env *Env) (bool, error) {
	for _, it := range c.items(expand) {
		ok, err := o.single(it.v, it.missing, env)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

type matchNot struct{ inner matchOp }

func (o matchNot) onPath(c *pathCtx, env *Env) (bool, error) {
	ok, err := o.inner.onPath(c, env)
	return !ok && err == nil, err
}

func (o matchNot) single(v any, missing bool, env *Env) (bool, error) {
	ok, err := o.inner.single(v, missing, env)
	return !ok && err == nil, err
}

type matchAnd []matchOp

func (o matchAnd) onPath(c *pathCtx, env *Env) (bool, error) {
	for _, x := range o {
		ok, err := x.onPath(c, env)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (o matchAnd) single(v any, missing bool, env *Env) (bool, error) {
	for _, x := range o {
		ok, err := x.single(v, missing, env)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

type matchConst bool

func (o matchConst) onPath(*pathCtx, *Env) (bool, error)  { return bool(o), nil }
func (o matchConst) single(any, bool, *Env) (bool, error) { return bool(o), nil }

// compileOperators compiles an operator document {$gt: 1, $lt: 5, ...}.
func compileOperators(d bson.D) (matchOp, error) {
	var ops matchAnd
	var regexVal any
	var options *string
	haveRegex := false
	for _, e := range d {
		switch e.Key {
		case "$regex":
			haveRegex, regexVal = true, e.Value
			continue
		case "$options":
			s, ok := e.Value.(string)
			if !ok {
				return nil, errf(codeBadValue, "$options has to be a string")
			}
			options = &s
			continue
		}
		o, err := compileOperator(e.Key, e.Value)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o)
	}
	if options != nil && !haveRegex {
		return nil, errf(codeBadValue, "$options needs a $regex")
	}
	if haveRegex {
		var pattern, opts string
		switch r := regexVal.(type) {
		case string:
			pattern = r
		case bson.Regex:
			pattern, opts = r.Pattern, r.Options
			if options != nil && opts != "" {
				return nil, errf(51075, "options set in both $regex and $options")
			}
		default:
			return nil, errf(codeBadValue, "$regex has to be a string")
		}
		if options != nil {
			opts = *options
		}
		o, err := newRegexOp(pattern, opts)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o)
	}
	if len(ops) == 1 {
		return ops[0], nil
	}
	return ops, nil
}

// unsupportedField names field-level operators the server knows but this
// simulator does not implement.
var unsupportedField = map[string]bool{
	"$near": true, "$nearSphere": true, "$geoWithin": true, "$geoIntersects": true,
	"$within": true, "$maxDistance": true, "$minDistance": true, "$geometry": true,
	"$box": true, "$center": true, "$centerSphere": true, "$polygon": true,
	"$jsonSchema": true, "$text": true, "$where": true,
}

func compileOperator(name string, v any) (matchOp, error) {
	switch name {
	case "$eq":
		return &matchCmp{kind: opEQ, rhs: v}, nil
	case "$ne":
		return matchNot{&matchCmp{kind: opEQ, rhs: v}}, nil
	case "$gt":
		return &matchCmp{kind: opGT, rhs: v}, nil
	case "$gte":
		return &matchCmp{kind: opGTE, rhs: v}, nil
	case "$lt":
		return &matchCmp{kind: opLT, rhs: v}, nil
	case "$lte":
		return &matchCmp{kind: opLTE, rhs: v}, nil
	case "$in":
		return compileIn(name, v)
	case "$nin":
		o, err := compileIn(name, v)
		if err != nil {
			return nil, err
		}
		return matchNot{o}, nil
	case "$exists":
		return matchExists(truthy(v)), nil
	case "$type":
		return compileType(v)
	case "$not":
		return compileNot(v)
	case "$elemMatch":
		return compileElemMatch(v)
	case "$all":
		return compileAll(v)
	case "$size":
		return compileSize(v)
	case "$mod":
		return compileMod(v)
	case "$comment":
		return matchConst(true), nil
	case "$bitsAllSet", "$bitsAllClear", "$bitsAnySet", "$bitsAnyClear":
		return compileBits(name, v)
	}
	if unsupportedField[name] {
		return nil, errf(codeBadValue, "query operator %s is not supported by mongosim", name)
	}
	return nil, errf(codeBadValue, "unknown operator: %s", name)
}

// ---- comparison ----

type cmpKind int

const (
	opEQ cmpKind = iota
	opGT
	opGTE
	opLT
	opLTE
)

type matchCmp struct {
	kind cmpKind
	rhs  any
}

func (o *matchCmp) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, true, o, env) }

func (o *matchCmp) single(v any, missing bool, env *Env) (bool, error) {
	if col := env.collator(); col != nil {
		return cmpMatches(o.kind, CollateValue(v, col), missing, CollateValue(o.rhs, col)), nil
	}
	return cmpMatches(o.kind, v, missing, o.rhs), nil
}

func isNaNValue(v any) bool {
	switch n := v.(type) {
	case float64:
		return math.IsNaN(n)
	case bson.Decimal128:
		return n.IsNaN()
	}
	return false
}

// cmpMatches applies a comparison operator to one value with the query
// language's type bracketing: values of other brackets never match, except
// against MinKey/MaxKey; a missing value counts as null; NaN only equals NaN.
func cmpMatches(kind cmpKind, v any, missing bool, rhs any) bool {
	if missing {
		v = nil
	}
	if vn, rn := isNaNValue(v), isNaNValue(rhs); vn || rn {
		both := vn && rn
		switch kind {
		case opEQ, opGTE, opLTE:
			return both
		}
		return false
	}
	var c int
	if TypeOrder(v) != TypeOrder(rhs) {
		switch rhs.(type) {
		case bson.MinKey, bson.MaxKey:
			if kind == opEQ {
				return false
			}
			c = Compare(v, rhs)
		default:
			return false
		}
	} else {
		c = Compare(v, rhs)
	}
	switch kind {
	case opEQ:
		return c == 0
	case opGT:
		return c > 0
	case opGTE:
		return c >= 0
	case opLT:
		return c < 0
	}
	return c <= 0
}

// ---- $in ----

type matchIn struct {
	values  []any
	regexes []*matchRegex
}

func compileIn(name string, v any) (matchOp, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, errf(codeBadValue, "%s needs an array", name)
	}
	o := &matchIn{}
	for _, x := range arr {
		if re, ok := x.(bson.Regex); ok {
			r, err := newRegexOp(re.Pattern, re.Options)
			if err != nil {
				return nil, err
			}
			o.regexes = append(o.regexes, r)
			continue
		}
		if _, isOp := isOperatorDoc(x); isOp {
			return nil, errf(codeBadValue, "cannot nest $ under %s", name)
		}
		o.values = append(o.values, x)
	}
	return o, nil
}

func (o *matchIn) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, true, o, env) }

func (o *matchIn) single(v any, missing bool, env *Env) (bool, error) {
	if col := env.collator(); col != nil {
		cv := CollateValue(v, col)
		for _, x := range o.values {
			if cmpMatches(opEQ, cv, missing, CollateValue(x, col)) {
				return true, nil
			}
		}
	} else {
		for _, x := range o.values {
			if cmpMatches(opEQ, v, missing, x) {
				return true, nil
			}
		}
	}
	for _, r := range o.regexes {
		if ok, _ := r.single(v, missing, env); ok {
			return true, nil
		}
	}
	return false, nil
}

// ---- $exists ----

type matchExists bool

func (o matchExists) onPath(c *pathCtx, env *Env) (bool, error) {
	found := false
	for _, it := range c.items(false) {
		if !it.missing {
			found = true
			break
		}
	}
	return found == bool(o), nil
}

func (o matchExists) single(_ any, missing bool, _ *Env) (bool, error) {
	return !missing == bool(o), nil
}

// ---- $type ----

var typeAliases = map[string]int32{
	"double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
	"objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
	"javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16,
	"timestamp": 17, "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
}

// bsonTypeCode returns the BSON type number of a value.
func bsonTypeCode(v any) int32 {
	switch v.(type) {
	case float64:
		return 1
	case string:
		return 2
	case bson.D, bson.M, map[string]any:
		return 3
	case bson.A, []any:
		return 4
	case bson.Binary, []byte:
		return 5
	case bson.Undefined:
		return 6
	case bson.ObjectID:
		return 7
	case bool:
		return 8
	case bson.DateTime:
		return 9
	case nil, bson.Null:
		return 10
	case bson.Regex:
		return 11
	case bson.DBPointer:
		return 12
	case bson.JavaScript:
		return 13
	case bson.Symbol:
		return 14
	case bson.CodeWithScope:
		return 15
	case int32, int:
		return 16
	case bson.Timestamp:
		return 17
	case int64:
		return 18
	case bson.Decimal128:
		return 19
	case bson.MinKey:
		return -1
	case bson.MaxKey:
		return 127
	}
	return 0
}

type matchType struct {
	codes  map[int32]bool
	number bool
}

func compileType(v any) (matchOp, error) {
	o := &matchType{codes: map[int32]bool{}}
	add := func(x any) error {
		if s, ok := x.(string); ok {
			if s == "number" {
				o.number = true
				return nil
			}
			c, ok := typeAliases[s]
			if !ok {
				return errf(codeBadValue, "Unknown type name alias: %s", s)
			}
			o.codes[c] = true
			return nil
		}
		if !isNumber(x) {
			return errf(codeTypeMismatch, "type must be represented as a number or a string")
		}
		i, ok := integralValue(x)
		if !ok {
			return errf(codeBadValue, "Invalid numerical type code: %v", x)
		}
		if _, valid := validTypeCodes[i]; !valid {
			return errf(codeBadValue, "Invalid numerical type code: %d", i)
		}
		o.codes[int32(i)] = true
		return nil
	}
	if arr, ok := v.(bson.A); ok {
		if len(arr) == 0 {
			return nil, errf(codeFailedToParse, "$type must match at least one type")
		}
		for _, x := range arr {
			if err := add(x); err != nil {
				return nil, err
			}
		}
	} else if err := add(v); err != nil {
		return nil, err
	}
	return o, nil
}

var validTypeCodes = func() map[int64]struct{} {
	m := map[int64]struct{}{}
	for _, c := range typeAliases {
		m[int64(c)] = struct{}{}
	}
	return m
}()

// integralValue returns a number's value as int64 when it is integral.
func integralValue(v any) (int64, bool) {
	if i, ok := intValue(v); ok {
		return i, true
	}
	switch n := v.(type) {
	case float64:
		if n == math.Trunc(n) && n >= -two63 && n < two63 {
			return int64(n), true
		}
	case bson.Decimal128:
		e := decimalExact(n)
		if e.class == 2 && e.rat.IsInt() && e.rat.Num().IsInt64() {
			return e.rat.Num().Int64(), true
		}
	}
	return 0, false
}

func (o *matchType) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, true, o, env) }

func (o *matchType) single(v any, missing bool, _ *Env) (bool, error) {
	if missing {
		return false, nil
	}
	if o.number && isNumber(v) {
		return true, nil
	}
	return o.codes[bsonTypeCode(v)], nil
}

// ---- $not ----

func compileNot(v any) (matchOp, error) {
	switch x := v.(type) {
	case bson.Regex:
		r, err := newRegexOp(x.Pattern, x.Options)
		if err != nil {
			return nil, err
		}
		return matchNot{r}, nil
	case bson.D:
		if len(x) == 0 {
			return nil, errf(codeBadValue, "$not cannot be empty")
		}
		if !strings.HasPrefix(x[0].Key, "$") {
			return nil, errf(codeBadValue, "unknown operator: %s", x[0].Key)
		}
		inner, err := compileOperators(x)
		if err != nil {
			return nil, err
		}
		return matchNot{inner}, nil
	}
	return nil, errf(codeBadValue, "$not needs a regex or a document")
}

// ---- $elemMatch ----

// matchElem matches arrays with at least one element satisfying either
// value operators (sub) or a sub-filter (filter).
type matchElem struct {
	sub    matchOp
	filter filterNode // object form; nil filter matches any document element
	object bool
}

var logicalInElemMatch = map[string]bool{
	"$and": true, "$or": true, "$nor": true, "$expr": true, "$where": true,
	"$text": true, "$comment": true, "$alwaysTrue": true, "$alwaysFalse": true,
}

func compileElemMatch(v any) (matchOp, error) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, errf(codeBadValue, "$elemMatch needs an Object")
	}
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") && !logicalInElemMatch[d[0].Key] {
		for _, e := range d {
			if !strings.HasPrefix(e.Key, "$") {
				return nil, errf(codeBadValue, "unknown operator: %s", e.Key)
			}
		}
		sub, err := compileOperators(d)
		if err != nil {
			return nil, err
		}
		return &matchElem{sub: sub}, nil
	}
	for _, e := range d {
		if e.Key == "$where" {
			return nil, errf(codeBadValue, "$where can only be applied to the top-level document")
		}
	}
	n, err := compileAnd(d)
	if err != nil {
		return nil, err
	}
	return &matchElem{filter: n, object: true}, nil
}

func (o *matchElem) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, false, o, env) }

func (o *matchElem) single(v any, missing bool, env *Env) (bool, error) {
	arr, ok := v.(bson.A)
	if missing || !ok {
		return false, nil
	}
	for _, e := range arr {
		if o.object {
			var d bson.D
			switch x := e.(type) {
			case bson.D:
				d = x
			case bson.A:
				d = arrayAsDoc(x)
			default:
				continue
			}
			if o.filter == nil {
				return true, nil
			}
			ok, err := o.filter.match(d, env)
			if err != nil {
				return false, err
			}
			if ok {
				return true, nil
			}
			continue
		}
		ok, err := o.sub.single(e, false, env)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// arrayAsDoc views an array as a document with fields "0", "1", ...
func arrayAsDoc(a bson.A) bson.D {
	d := make(bson.D, len(a))
	for i, v := range a {
		d[i] = bson.E{Key: itoa(i), Value: v}
	}
	return d
}

func itoa(i int) string { return strconv.Itoa(i) }

// ---- $all ----

func compileAll(v any) (matchOp, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, errf(codeBadValue, "$all needs an array")
	}
	if len(arr) == 0 {
		return matchConst(false), nil
	}
	var ops matchAnd
	elem := 0
	for _, x := range arr {
		if d, isOp := isOperatorDoc(x); isOp {
			if d[0].Key != "$elemMatch" {
				return nil, errf(codeBadValue, "no $ expressions in $all")
			}
			o, err := compileOperator("$elemMatch", d[0].Value)
			if err != nil {
				return nil, err
			}
			elem++
			ops = append(ops, o)
			continue
		}
		if re, ok := x.(bson.Regex); ok {
			o, err := newRegexOp(re.Pattern, re.Options)
			if err != nil {
				return nil, err
			}
			ops = append(ops, o)
			continue
		}
		ops = append(ops, &matchCmp{kind: opEQ, rhs: x})
	}
	if elem > 0 && elem != len(ops) {
		return nil, errf(codeBadValue, "$all/$elemMatch has to be consistent")
	}
	if len(ops) == 1 {
		return ops[0], nil
	}
	return ops, nil
}

// ---- $size ----

type matchSize int64

func compileSize(v any) (matchOp, error) {
	if !isNumber(v) {
		return nil, errf(codeBadValue, "$size needs a number")
	}
	i, ok := integralValue(v)
	if !ok {
		return nil, errf(codeBadValue, "$size must be a whole number")
	}
	if i < 0 {
		return nil, errf(codeBadValue, "$size may not be negative")
	}
	return matchSize(i), nil
}

func (o matchSize) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, false, o, env) }

func (o matchSize) single(v any, missing bool, _ *Env) (bool, error) {
	arr, ok := v.(bson.A)
	return !missing && ok && int64(len(arr)) == int64(o), nil
}

// ---- $mod ----

type matchMod struct{ divisor, remainder int64 }

func compileMod(v any) (matchOp, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, errf(codeBadValue, "malformed mod, needs to be an array")
	}
	if len(arr) < 2 {
		return nil, errf(codeBadValue, "malformed mod, not enough elements")
	}
	if len(arr) > 2 {
		return nil, errf(codeBadValue, "malformed mod, too many elements")
	}
	if !isNumber(arr[0]) {
		return nil, errf(codeBadValue, "malformed mod, divisor not a number")
	}
	if !isNumber(arr[1]) {
		return nil, errf(codeBadValue, "malformed mod, remainder not a number")
	}
	d, ok := truncInt64(arr[0])
	if !ok {
		return nil, errf(codeBadValue, "malformed mod, divisor value is invalid")
	}
	r, ok := truncInt64(arr[1])
	if !ok {
		return nil, errf(codeBadValue, "malformed mod, remainder value is invalid")
	}
	if d == 0 {
		return nil, errf(codeBadValue, "divisor cannot be 0")
	}
	return &matchMod{divisor: d, remainder: r}, nil
}

// truncInt64 truncates a number toward zero; false for NaN, infinities and
// values outside the int64 range.
func truncInt64(v any) (int64, bool) {
	if i, ok := intValue(v); ok {
		return i, true
	}
	switch n := v.(type) {
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, false
		}
		t := math.Trunc(n)
		if t < -two63 || t >= two63 {
			return 0, false
		}
		return int64(t), true
	case bson.Decimal128:
		e := decimalExact(n)
		if e.class != 2 {
			return 0, false
		}
		q := new(big.Int).Quo(e.rat.Num(), e.rat.Denom())
		if !q.IsInt64() {
			return 0, false
		}
		return q.Int64(), true
	}
	return 0, false
}

func (o *matchMod) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, true, o, env) }

func (o *matchMod) single(v any, missing bool, _ *Env) (bool, error) {
	if missing || !isNumber(v) {
		return false, nil
	}
	i, ok := truncInt64(v)
	if !ok {
		return false, nil
	}
	if o.divisor == -1 {
		return o.remainder == 0, nil // avoids MinInt64 % -1 overflow
	}
	return i%o.divisor == o.remainder, nil
}

// ---- bitwise ----

// matchBits implements $bitsAllSet, $bitsAnySet, $bitsAllClear and
// $bitsAnyClear over integral numbers (two's complement, sign-extended past
// bit 63) and binData (little-endian bit order).
type matchBits struct {
	positions []int
	wantSet   bool // test for set (true) or clear (false) bits
	all       bool // all positions (true) or any position (false)
}

func compileBits(name string, v any) (matchOp, error) {
	o := &matchBits{
		wantSet: name == "$bitsAllSet" || name == "$bitsAnySet",
		all:     name == "$bitsAllSet" || name == "$bitsAllClear",
	}
	switch x := v.(type) {
	case bson.Binary:
		for i, b := range x.Data {
			for j := 0; j < 8; j++ {
				if b&(1<<j) != 0 {
					o.positions = append(o.positions, i*8+j)
				}
			}
		}
	case bson.A:
		for _, p := range x {
			i, ok := integralValue(p)
			if !isNumber(p) || !ok {
				return nil, errf(codeBadValue, "%s bit positions must be integers, found %v", name, p)
			}
			if i < 0 || i > math.MaxInt32 {
				return nil, errf(codeBadValue, "%s bit positions must be non-negative 32-bit integers, found %d", name, i)
			}
			o.positions = append(o.positions, int(i))
		}
	default:
		if !isNumber(v) {
			return nil, errf(codeBadValue, "%s takes an Array, a number, or a BinData but received: %v", name, v)
		}
		mask, ok := integralValue(v)
		if !ok {
			return nil, errf(codeFailedToParse, "%s bitmask must be an integer representable as a 64-bit integer", name)
		}
		if mask < 0 {
			return nil, errf(codeFailedToParse, "%s bitmask must be a non-negative integer", name)
		}
		for i := 0; i < 63; i++ {
			if mask&(1<<i) != 0 {
				o.positions = append(o.positions, i)
			}
		}
	}
	return o, nil
}

func (o *matchBits) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, true, o, env) }

func (o *matchBits) single(v any, missing bool, _ *Env) (bool, error) {
	if missing {
		return false, nil
	}
	var bit func(p int) bool
	switch x := v.(type) {
	case bson.Binary:
		bit = func(p int) bool { return p/8 < len(x.Data) && x.Data[p/8]&(1<<(p%8)) != 0 }
	case int32, int64, float64, bson.Decimal128:
		n, ok := integralValue(x)
		if !ok {
			return false, nil
		}
		bit = func(p int) bool {
			if p >= 64 {
				return n < 0
			}
			return n&(1<<p) != 0
		}
	default:
		return false, nil
	}
	for _, p := range o.positions {
		if bit(p) == o.wantSet {
			if !o.all {
				return true, nil
			}
		} else if o.all {
			return false, nil
		}
	}
	return o.all, nil
}

// ---- regular expressions ----

type matchRegex struct {
	pattern, options string
	re               *regexp.Regexp
}

var regexCache sync.Map // "options/pattern" -> *regexp.Regexp

// inlineMultiline finds an inline flag group turning on m, e.g. "(?im)".
var inlineMultiline = regexp.MustCompile(`\(\?[imsxU]*m`)

// newRegexOp compiles a PCRE-style pattern with MongoDB options (i, m, s,
// x, u) to a Go regexp. Constructs Go's RE2 engine cannot run (lookaround,
// backreferences, possessive quantifiers, atomic groups) are reported as
// unsupported (code 2); invalid patterns as 51091.
func newRegexOp(pattern, options string) (*matchRegex, error) {
	re, err := compileRegex(pattern, options)
	if err != nil {
		return nil, err
	}
	return &matchRegex{pattern: pattern, options: options, re: re}, nil
}

func compileRegex(pattern, options string) (*regexp.Regexp, error) {
	key := options + "/" + pattern
	if re, ok := regexCache.Load(key); ok {
		return re.(*regexp.Regexp), nil
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, errf(51091, "Regular expression is invalid: pattern contains a NUL byte")
	}
	var flags string
	extended, multiline := false, false
	for _, c := range options {
		switch c {
		case 'i', 's':
			if !strings.ContainsRune(flags, c) {
				flags += string(c)
			}
		case 'm':
			multiline = true
			if !strings.ContainsRune(flags, c) {
				flags += "m"
			}
		case 'x':
			extended = true
		case 'u':
		default:
			return nil, errf(51108, "invalid flag in regex options: %c", c)
		}
	}
	if inlineMultiline.MatchString(pattern) {
		multiline = true // keep $ as written when (?m) appears in the pattern
	}
	src := translatePattern(pattern, extended, multiline)
	if flags != "" {
		src = "(?" + flags + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			switch se.Code {
			case syntax.ErrInvalidPerlOp, syntax.ErrInvalidEscape, syntax.ErrInvalidNamedCapture, syntax.ErrInvalidRepeatOp:
				return nil, errf(codeBadValue, "regular expression /%s/ uses a construct mongosim does not support (Go RE2 has no lookaround, backreferences, atomic groups or possessive quantifiers): %v", pattern, err)
			}
		}
		return nil, errf(51091, "Regular expression is invalid: %v", err)
	}
	regexCache.Store(key, re)
	return re, nil
}

// translatePattern rewrites PCRE-only syntax into RE2 syntax: with x it
// drops unescaped whitespace and #-comments outside character classes; \Z
// and (without m) $ become "end, or before a final newline".
func translatePattern(p string, extended, multiline bool) string {
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			r, size := utf8.DecodeRuneInString(p[i+1:])
			switch {
			case !inClass && r == 'Z':
				sb.WriteString(`(?:\n?\z)`)
			case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsPunct(r) || unicode.IsSymbol(r)):
				sb.WriteByte(c)
				sb.WriteString(p[i+1 : i+1+size])
			default:
				// PCRE lets any other character be escaped to stand for
				// itself (e.g. "\ " under x); RE2 does not.
				sb.WriteString(regexp.QuoteMeta(string(r)))
			}
			i += size
			continue
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			sb.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal.
			if i+1 < len(p) && p[i+1] == '^' {
				sb.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				sb.WriteString(`\]`)
				i++
			}
			continue
		case extended && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'):
			continue
		case extended && c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			continue
		case c == '$' && !multiline:
			sb.WriteString(`(?:\n?\z)`)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

func (o *matchRegex) onPath(c *pathCtx, env *Env) (bool, error) { return anyItem(c, true, o, env) }

func (o *matchRegex) single(v any, missing bool, _ *Env) (bool, error) {
	if missing {
		return false, nil
	}
	switch x := v.(type) {
	case string:
		return o.re.MatchString(x), nil
	case bson.Symbol:
		return o.re.MatchString(string(x)), nil
	case bson.Regex:
		return x.Pattern == o.pattern && x.Options == o.options, nil
	}
	return false, nil
}

// evalExprBool evaluates a $expr aggregation expression with doc as
// $$ROOT and converts the result to a boolean the aggregation way.
func evalExprBool(expr any, doc bson.D, env *Env) (bool, error) {
	v, err := Eval(expr, doc, env)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

// ---- upsert seeding ----

// eqField is one equality a query pins down: a dotted path and its value.
type eqField struct {
	path  string
	parts []string
	value any
}

// EqualityFields returns the document an upsert seeds from its query: the
// fields fixed by equality (implicit {a: 1}, {a: {$eq: 1}}, a one-element
// $in or $all, members of $and and of a one-branch $or), dotted paths
// building nested documents, _id first. Regexes, ranges, $expr and other
// operators seed nothing. Two equalities on the same path, or on a path and
// its prefix, fail with code 54 (NotSingleValueField).
func EqualityFields(filter bson.D) (bson.D, error) {
	if _, err := CompileFilter(filter); err != nil {
		return nil, err
	}
	var fields []eqField
	if err := collectEqualities(filter, &fields); err != nil {
		return nil, err
	}
	out := bson.D{}
	for _, idFirst := range []bool{true, false} {
		for _, f := range fields {
			if (f.parts[0] == "_id") == idFirst {
				out = setPathValue(out, f.parts, f.value)
			}
		}
	}
	return out, nil
}

func collectEqualities(filter bson.D, fields *[]eqField) error {
	for _, e := range filter {
		switch e.Key {
		case "$and":
			for _, sub := range e.Value.(bson.A) {
				if err := collectEqualities(sub.(bson.D), fields); err != nil {
					return err
				}
			}
			continue
		case "$or":
			// A one-branch $or (after dropping duplicate branches, as the
			// server's optimizer does) is an $and of its branch.
			arr := e.Value.(bson.A)
			first := HashKey(arr[0])
			single := true
			for _, b := range arr[1:] {
				if HashKey(b) != first {
					single = false
					break
				}
			}
			if single {
				if err := collectEqualities(arr[0].(bson.D), fields); err != nil {
					return err
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		if d, ok := isOperatorDoc(e.Value); ok {
			for _, o := range d {
				var vals []any
				switch o.Key {
				case "$eq":
					vals = []any{o.Value}
				case "$in":
					if arr := o.Value.(bson.A); len(arr) == 1 {
						if _, isRe := arr[0].(bson.Regex); !isRe {
							vals = []any{arr[0]}
						}
					}
				case "$all":
					for _, x := range o.Value.(bson.A) {
						_, isRe := x.(bson.Regex)
						_, isOp := isOperatorDoc(x)
						if !isRe && !isOp {
							vals = append(vals, x)
						}
					}
				}
				for _, v := range vals {
					if err := addEquality(fields, e.Key, v); err != nil {
						return err
					}
				}
			}
			continue
		}
		if _, isRe := e.Value.(bson.Regex); isRe {
			continue
		}
		if err := addEquality(fields, e.Key, e.Value); err != nil {
			return err
		}
	}
	return nil
}

func addEquality(fields *[]eqField, path string, v any) error {
	parts := splitPath(path)
	for _, f := range *fields {
		if f.path == path {
			return errf(codeNotSingleValueField, "cannot infer query fields to set, path '%s' is matched twice", path)
		}
		short, long := f.parts, parts
		if len(short) > len(long) {
			short, long = long, short
		}
		prefix := true
		for i := range short {
			if short[i] != long[i] {
				prefix = false
				break
			}
		}
		if prefix {
			return errf(codeNotSingleValueField, "cannot infer query fields to set, both paths '%s' and '%s' are matched", f.path, path)
		}
	}
	*fields = append(*fields, eqField{path: path, parts: parts, value: v})
	return nil
}

// setPathValue returns a copy of d with the dotted path set to v, creating
// (or replacing non-document values with) intermediate documents.
func setPathValue(d bson.D, parts []string, v any) bson.D {
	out := make(bson.D, 0, len(d)+1)
	found := false
	for _, e := range d {
		if e.Key == parts[0] && !found {
			found = true
			if len(parts) == 1 {
				out = append(out, bson.E{Key: e.Key, Value: v})
			} else {
				sub, _ := e.Value.(bson.D)
				out = append(out, bson.E{Key: e.Key, Value: setPathValue(sub, parts[1:], v)})
			}
			continue
		}
		out = append(out, e)
	}
	if !found {
		if len(parts) == 1 {
			out = append(out, bson.E{Key: parts[0], Value: v})
		} else {
			out = append(out, bson.E{Key: parts[0], Value: setPathValue(nil, parts[1:], v)})
		}
	}
	return out
}
