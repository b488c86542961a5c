package query

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// missingT marks the absence of a value inside the expression evaluator
// (a field path to a field that does not exist, or $$REMOVE). It never leaks
// out of Eval: the public API turns it into nil.
type missingT struct{}

var missingV = missingT{}

func isMissing(v any) bool { _, ok := v.(missingT); return ok }

// isNullish reports whether v is null, undefined or missing.
func isNullish(v any) bool {
	switch v.(type) {
	case nil, missingT, bson.Undefined:
		return true
	}
	return false
}

// Eval evaluates an aggregation expression against root (which is also
// $$CURRENT). Field paths ("$a.b") traverse arrays as aggregation does (an
// array yields the array of the sub-field values of its document elements);
// numeric path parts name fields, not array positions. A field path to a
// missing field, and $$REMOVE, evaluate to nil. $$NOW is env.Now (or the wall
// clock when env is nil or Now is zero) as a bson.DateTime. Unknown operators
// give Error 168 (InvalidPipelineOperator).
func Eval(expr any, root bson.D, env *Env) (any, error) {
	ev := newEvaluator(root, env)
	v, err := ev.eval(expr)
	if err != nil {
		return nil, err
	}
	if isMissing(v) {
		return nil, nil
	}
	return v, nil
}

// evalValue is Eval that keeps the missing marker, for stages that must tell
// "missing" from null.
func evalValue(expr any, root bson.D, env *Env) (any, error) {
	return newEvaluator(root, env).eval(expr)
}

type evaluator struct {
	env  *Env
	now  bson.DateTime
	root bson.D
	vars map[string]any // user variables plus CURRENT
}

func newEvaluator(root bson.D, env *Env) *evaluator {
	ev := &evaluator{env: env, root: root}
	now := time.Time{}
	if env != nil {
		now = env.Now
	}
	if now.IsZero() {
		now = time.Now()
	}
	ev.now = bson.NewDateTimeFromTime(now)
	ev.vars = map[string]any{"CURRENT": root}
	if env != nil {
		for k, v := range env.Vars {
			ev.vars[k] = v
		}
	}
	return ev
}

// with returns a copy of ev with extra variables bound.
func (ev *evaluator) with(vars map[string]any) *evaluator {
	n := *ev
	n.vars = make(map[string]any, len(ev.vars)+len(vars))
	for k, v := range ev.vars {
		n.vars[k] = v
	}
	for k, v := range vars {
		n.vars[k] = v
	}
	return &n
}

func (ev *evaluator) current() any { return ev.vars["CURRENT"] }

// eval evaluates one expression; the result may be the missing marker.
func (ev *evaluator) eval(expr any) (any, error) {
	switch e := expr.(type) {
	case string:
		if strings.HasPrefix(e, "$") {
			return ev.evalPath(e)
		}
		return e, nil
	case bson.D:
		if len(e) > 0 && strings.HasPrefix(e[0].Key, "$") {
			if len(e) != 1 {
				return nil, errf(15983, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s", len(e), renderValue(e))
			}
			return ev.evalOperator(e[0].Key, e[0].Value)
		}
		out := make(bson.D, 0, len(e))
		for _, el := range e {
			if strings.HasPrefix(el.Key, "$") {
				return nil, errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
			}
			v, err := ev.eval(el.Value)
			if err != nil {
				return nil, err
			}
			if !isMissing(v) {
				out = append(out, bson.E{Key: el.Key, Value: v})
			}
		}
		return out, nil
	case bson.M:
		return ev.eval(mapDoc(e))
	case bson.A:
		out := make(bson.A, 0, len(e))
		for _, x := range e {
			v, err := ev.eval(x)
			if err != nil {
				return nil, err
			}
			if isMissing(v) {
				v = nil
			}
			out = append(out, v)
		}
		return out, nil
	case []any:
		return ev.eval(bson.A(e))
	case int:
		return narrowInt(int64(e)), nil
	}
	return expr, nil
}

func mapDoc(m bson.M) bson.D {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := make(bson.D, 0, len(m))
	for _, k := range keys {
		d = append(d, bson.E{Key: k, Value: m[k]})
	}
	return d
}

// redact markers for $$KEEP/$$PRUNE/$$DESCEND.
type redactMarker string

// evalPath resolves "$field.path" and "$$var.path".
func (ev *evaluator) evalPath(s string) (any, error) {
	var base any
	var rest string
	if strings.HasPrefix(s, "$$") {
		name := s[2:]
		if i := strings.IndexByte(name, '.'); i >= 0 {
			name, rest = name[:i], name[i+1:]
		}
		switch name {
		case "ROOT":
			base = ev.root
		case "NOW":
			base = ev.now
		case "CLUSTER_TIME":
			if ev.env != nil {
				base = ev.env.ClusterTime
			} else {
				base = bson.Timestamp{}
			}
		case "REMOVE":
			base = missingV
		case "KEEP", "PRUNE", "DESCEND":
			base = redactMarker(name)
		case "":
			return nil, errf(16869, "empty variable name")
		default:
			v, ok := ev.vars[name]
			if !ok {
				return nil, errf(17276, "Use of undefined variable: %s", name)
			}
			base = v
		}
	} else {
		if s == "$" {
			return nil, errf(16872, "'$' by itself is not a valid FieldPath")
		}
		base = ev.current()
		rest = s[1:]
	}
	if rest == "" {
		return base, nil
	}
	parts := strings.Split(rest, ".")
	for _, p := range parts {
		if p == "" {
			return nil, errf(15998, "FieldPath field names may not be empty strings.")
		}
	}
	return fieldPathValue(base, parts), nil
}

// fieldPathValue walks parts through documents, mapping over arrays the way
// aggregation field paths do.
func fieldPathValue(v any, parts []string) any {
	if len(parts) == 0 {
		return v
	}
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == parts[0] {
				return fieldPathValue(e.Value, parts[1:])
			}
		}
		return missingV
	case bson.A:
		out := bson.A{}
		for _, el := range x {
			switch el.(type) {
			case bson.D, bson.A:
				r := fieldPathValue(el, parts)
				if !isMissing(r) {
					out = append(out, r)
				}
			}
		}
		return out
	}
	return missingV
}

// ---------------------------------------------------------------- operators

type opFunc func(ev *evaluator, operand any) (any, error)

var exprOps map[string]opFunc

// knownUnsupportedExprs are real server operators mongosim does not implement.
var knownUnsupportedExprs = map[string]bool{
	"$dateToString": true, "$dateFromString": true, "$dateToParts": true, "$dateFromParts": true,
	"$dateAdd": true, "$dateSubtract": true, "$dateDiff": true, "$dateTrunc": true, "$year": true,
	"$month": true, "$dayOfMonth": true, "$dayOfWeek": true, "$dayOfYear": true, "$hour": true,
	"$minute": true, "$second": true, "$millisecond": true, "$week": true, "$isoWeek": true,
	"$isoWeekYear": true, "$isoDayOfWeek": true, "$regexMatch": true, "$regexFind": true,
	"$regexFindAll": true, "$function": true, "$accumulator": true, "$meta": true,
	"$convert": true, "$toDecimal": true, "$toDate": true, "$toObjectId": true, "$split": true,
	"$substr": true, "$substrBytes": true, "$substrCP": true, "$trim": true, "$ltrim": true,
	"$rtrim": true, "$indexOfBytes": true, "$indexOfCP": true, "$indexOfArray": true,
	"$replaceOne": true, "$replaceAll": true, "$zip": true, "$range": true, "$reverseArray": true,
	"$objectToArray": true, "$arrayToObject": true, "$setField": true, "$unsetField": true,
	"$round": true, "$ln": true, "$log": true, "$log10": true, "$pow": true, "$exp": true,
	"$sqrt": true, "$rand": true, "$sampleRate": true, "$binarySize": true, "$bsonSize": true,
	"$setUnion": true, "$setIntersection": true, "$setDifference": true, "$setEquals": true,
	"$setIsSubset": true, "$allElementsTrue": true, "$anyElementTrue": true, "$sortArray": true,
	"$firstN": true, "$lastN": true, "$maxN": true, "$minN": true, "$strLenCP": true,
	"$strLenBytes": true, "$strcasecmp": true, "$tsSecond": true, "$tsIncrement": true,
}

func init() {
	exprOps = map[string]opFunc{
		"$literal":      func(ev *evaluator, o any) (any, error) { return o, nil },
		"$add":          opAdd,
		"$subtract":     opSubtract,
		"$multiply":     opMultiply,
		"$divide":       opDivide,
		"$mod":          opMod,
		"$abs":          opAbs,
		"$floor":        opFloorCeil("$floor", math.Floor),
		"$ceil":         opFloorCeil("$ceil", math.Ceil),
		"$trunc":        opFloorCeil("$trunc", math.Trunc),
		"$cond":         opCond,
		"$ifNull":       opIfNull,
		"$eq":           opCmp("$eq", func(c int) any { return c == 0 }),
		"$ne":           opCmp("$ne", func(c int) any { return c != 0 }),
		"$gt":           opCmp("$gt", func(c int) any { return c > 0 }),
		"$gte":          opCmp("$gte", func(c int) any { return c >= 0 }),
		"$lt":           opCmp("$lt", func(c int) any { return c < 0 }),
		"$lte":          opCmp("$lte", func(c int) any { return c <= 0 }),
		"$cmp":          opCmp("$cmp", func(c int) any { return int32(sgn(c)) }),
		"$and":          opAnd,
		"$or":           opOr,
		"$not":          opNot,
		"$max":          opMinMax("$max", 1),
		"$min":          opMinMax("$min", -1),
		"$sum":          opSumAvg("$sum"),
		"$avg":          opSumAvg("$avg"),
		"$concat":       opConcat,
		"$toString":     opToString,
		"$toLower":      opCase("$toLower", strings.ToLower),
		"$toUpper":      opCase("$toUpper", strings.ToUpper),
		"$size":         opSize,
		"$in":           opIn,
		"$arrayElemAt":  opArrayElemAt,
		"$first":        opFirstLast("$first", true),
		"$last":         opFirstLast("$last", false),
		"$concatArrays": opConcatArrays,
		"$type":         opType,
		"$isArray":      opIsArray,
		"$isNumber":     opIsNumber,
		"$getField":     opGetField,
		"$mergeObjects": opMergeObjects,
		"$switch":       opSwitch,
		"$let":          opLet,
		"$map":          opMap,
		"$filter":       opFilter,
		"$reduce":       opReduce,
		"$toInt":        opConvert("$toInt"),
		"$toLong":       opConvert("$toLong"),
		"$toDouble":     opConvert("$toDouble"),
		"$toBool":       opConvert("$toBool"),
		"$expr":         func(ev *evaluator, o any) (any, error) { return ev.eval(o) },
	}
}

func (ev *evaluator) evalOperator(name string, operand any) (any, error) {
	f, ok := exprOps[name]
	if !ok {
		if knownUnsupportedExprs[name] {
			return nil, errf(9000001, "mongosim does not support the aggregation expression operator %s", name)
		}
		return nil, errf(168, "Unrecognized expression '%s'", name)
	}
	return f(ev, operand)
}

// rawArgs splits an operand into its argument expressions: an array operand
// lists them, anything else is a single argument.
func rawArgs(operand any) []any {
	if a, ok := operand.(bson.A); ok {
		return []any(a)
	}
	return []any{operand}
}

// evalArgs evaluates every argument (missing stays missing).
func (ev *evaluator) evalArgs(operand any) ([]any, error) {
	raw := rawArgs(operand)
	out := make([]any, len(raw))
	for i, r := range raw {
		v, err := ev.eval(r)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (ev *evaluator) evalN(name string, operand any, n int) ([]any, error) {
	raw := rawArgs(operand)
	if len(raw) != n {
		return nil, errf(16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, n, len(raw))
	}
	return ev.evalArgs(operand)
}

func sgn(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// ------------------------------------------------------------- arithmetic

func isNum(v any) bool {
	switch v.(type) {
	case int32, int64, float64, bson.Decimal128:
		return true
	}
	return false
}

// numRank: 1 int32, 2 int64, 3 double, 4 decimal.
func numRank(v any) int {
	switch v.(type) {
	case int32:
		return 1
	case int64:
		return 2
	case float64:
		return 3
	case bson.Decimal128:
		return 4
	}
	return 0
}

func numFloat(v any) float64 {
	switch x := v.(type) {
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	case bson.Decimal128:
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil {
			return math.NaN()
		}
		return f
	case int:
		return float64(x)
	}
	return math.NaN()
}

func numInt(v any) int64 {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return int64(numFloat(v))
}

// intValue returns v as int32 when it fits, else int64.
func narrowInt(v int64) any {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		return int32(v)
	}
	return v
}

// toDecimalParts returns v as significand and base-10 exponent. Doubles
// are converted with 15 significant digits, as the server does.
func toDecimalParts(v any) (*big.Int, int, bool) {
	switch x := v.(type) {
	case int32:
		return big.NewInt(int64(x)), 0, true
	case int64:
		return big.NewInt(x), 0, true
	case float64:
		d, err := bson.ParseDecimal128(strconv.FormatFloat(x, 'g', 15, 64))
		if err != nil {
			return nil, 0, false
		}
		return toDecimalParts(d)
	case bson.Decimal128:
		bi, exp, err := x.BigInt()
		if err != nil {
			return nil, 0, false
		}
		return bi, exp, true
	}
	return nil, 0, false
}

var bigTen = big.NewInt(10)

// decimalArith adds, subtracts or multiplies when an operand is a
// Decimal128, rounding half-even to 34 digits. NaN and infinities are not
// supported.
func decimalArith(op string, a, b any) (any, error) {
	x, ex, ok1 := toDecimalParts(a)
	y, ey, ok2 := toDecimalParts(b)
	if !ok1 || !ok2 {
		return nil, errDecimal(op + " with NaN or Infinity")
	}
	var r *big.Int
	var e int
	switch op {
	case "*":
		r, e = new(big.Int).Mul(x, y), ex+ey
	default:
		e = min(ex, ey)
		x = new(big.Int).Mul(x, new(big.Int).Exp(bigTen, big.NewInt(int64(ex-e)), nil))
		y = new(big.Int).Mul(y, new(big.Int).Exp(bigTen, big.NewInt(int64(ey-e)), nil))
		if op == "+" {
			r = new(big.Int).Add(x, y)
		} else {
			r = new(big.Int).Sub(x, y)
		}
	}
	limit := new(big.Int).Exp(bigTen, big.NewInt(34), nil)
	for new(big.Int).Abs(r).Cmp(limit) >= 0 {
		q, m := new(big.Int).QuoRem(r, bigTen, new(big.Int))
		m.Abs(m)
		if c := m.Cmp(big.NewInt(5)); c > 0 || c == 0 && q.Bit(0) == 1 {
			if r.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		r, e = q, e+1
	}
	d, ok := bson.ParseDecimal128FromBigInt(r, e)
	if !ok {
		return nil, errDecimal(op + " overflow")
	}
	return d, nil
}

func errDecimal(op string) error {
	return errf(9000001, "mongosim does not support decimal128 arithmetic (%s)", op)
}

// arith combines two numbers with the server's result typing: the wider of
// the operand types; int32 overflow widens to int64, int64 overflow to double.
func arith(op string, a, b any) (any, error) {
	ra, rb := numRank(a), numRank(b)
	r := ra
	if rb > r {
		r = rb
	}
	if r == 4 {
		return decimalArith(op, a, b)
	}
	if r == 3 {
		x, y := numFloat(a), numFloat(b)
		switch op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		}
	}
	x, y := numInt(a), numInt(b)
	var res int64
	overflow := false
	switch op {
	case "+":
		res = x + y
		overflow = (x > 0 && y > 0 && res < 0) || (x < 0 && y < 0 && res >= 0)
	case "-":
		res = x - y
		overflow = (x >= 0 && y < 0 && res < 0) || (x < 0 && y > 0 && res >= 0)
	case "*":
		res = x * y
		overflow = x != 0 && (res/x != y || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64))
	}
	if overflow {
		f, _ := arith(op, numFloat(a), numFloat(b))
		return f, nil
	}
	if r == 1 {
		if res >= math.MinInt32 && res <= math.MaxInt32 {
			return int32(res), nil
		}
	}
	return res, nil
}

func opAdd(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	var acc any = int32(0)
	var date *bson.DateTime
	for _, a := range args {
		switch x := a.(type) {
		case nil, missingT, bson.Undefined:
			return nil, nil
		case bson.DateTime:
			if date != nil {
				return nil, errf(16612, "only one date allowed in an $add expression")
			}
			d := x
			date = &d
		default:
			if !isNum(a) {
				return nil, errf(14, "$add only supports numeric or date types, not %s", typeNameOf(a))
			}
			if acc, err = arith("+", acc, a); err != nil {
				return nil, err
			}
		}
	}
	if date != nil {
		var ms int64
		if f, ok := acc.(float64); ok {
			ms = int64(math.Round(f))
		} else {
			ms = numInt(acc)
		}
		return bson.DateTime(int64(*date) + ms), nil
	}
	return acc, nil
}

func opSubtract(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$subtract", operand, 2)
	if err != nil {
		return nil, err
	}
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nil, nil
	}
	if da, ok := a.(bson.DateTime); ok {
		if db, ok := b.(bson.DateTime); ok {
			return int64(da) - int64(db), nil
		}
		if isNum(b) {
			var ms int64
			if f, ok := b.(float64); ok {
				ms = int64(math.Round(f))
			} else {
				ms = numInt(b)
			}
			return bson.DateTime(int64(da) - ms), nil
		}
		return nil, errf(16613, "can't $subtract %s from Date", typeNameOf(b))
	}
	if !isNum(a) || !isNum(b) {
		return nil, errf(16556, "can't $subtract %s from %s", typeNameOf(b), typeNameOf(a))
	}
	return arith("-", a, b)
}

func opMultiply(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	var acc any = int32(1)
	for _, a := range args {
		if isNullish(a) {
			return nil, nil
		}
		if !isNum(a) {
			return nil, errf(16555, "$multiply only supports numeric types, not %s", typeNameOf(a))
		}
		if acc, err = arith("*", acc, a); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

func opDivide(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$divide", operand, 2)
	if err != nil {
		return nil, err
	}
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nil, nil
	}
	if !isNum(a) || !isNum(b) {
		return nil, errf(16609, "$divide only supports numeric types, not %s and %s", typeNameOf(a), typeNameOf(b))
	}
	if numRank(a) == 4 || numRank(b) == 4 {
		return nil, errDecimal("$divide")
	}
	if numFloat(b) == 0 {
		return nil, errf(2, "can't $divide by zero")
	}
	return numFloat(a) / numFloat(b), nil
}

func opMod(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$mod", operand, 2)
	if err != nil {
		return nil, err
	}
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nil, nil
	}
	if !isNum(a) || !isNum(b) {
		return nil, errf(16611, "$mod only supports numeric types, not %s and %s", typeNameOf(a), typeNameOf(b))
	}
	r := max(numRank(a), numRank(b))
	if r == 4 {
		return nil, errDecimal("$mod")
	}
	if numFloat(b) == 0 {
		return nil, errf(16610, "can't $mod by zero")
	}
	if r == 3 {
		return math.Mod(numFloat(a), numFloat(b)), nil
	}
	x, y := numInt(a), numInt(b)
	if y == -1 {
		if r == 1 {
			return int32(0), nil
		}
		return int64(0), nil
	}
	if r == 1 {
		return int32(x % y), nil
	}
	return x % y, nil
}

func opAbs(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$abs", operand, 1)
	if err != nil {
		return nil, err
	}
	switch x := args[0].(type) {
	case nil, missingT, bson.Undefined:
		return nil, nil
	case int32:
		if x == math.MinInt32 {
			return -int64(x), nil
		}
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case int64:
		if x == math.MinInt64 {
			return nil, errf(28680, "can't take $abs of long long min")
		}
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	case bson.Decimal128:
		return nil, errDecimal("$abs")
	}
	return nil, errf(28765, "$abs only supports numeric types, not %s", typeNameOf(args[0]))
}

func opFloorCeil(name string, f func(float64) float64) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		switch x := args[0].(type) {
		case nil, missingT, bson.Undefined:
			return nil, nil
		case int32, int64:
			return x, nil
		case float64:
			return f(x), nil
		case bson.Decimal128:
			return nil, errDecimal(name)
		}
		return nil, errf(28765, "%s only supports numeric types, not %s", name, typeNameOf(args[0]))
	}
}

// ------------------------------------------------------------- logic

// truthy is the aggregation boolean coercion: false, null, undefined,
// missing and numeric zero are false; everything else is true.
func truthyV(v any) bool {
	switch x := v.(type) {
	case nil, missingT, bson.Undefined:
		return false
	case bool:
		return x
	case int32:
		return x != 0
	case int64:
		return x != 0
	case float64:
		return x != 0
	case bson.Decimal128:
		return numFloat(x) != 0
	}
	return true
}

func opCond(ev *evaluator, operand any) (any, error) {
	var ifE, thenE, elseE any
	switch o := operand.(type) {
	case bson.A:
		if len(o) != 3 {
			return nil, errf(16020, "Expression $cond takes exactly 3 arguments. %d were passed in.", len(o))
		}
		ifE, thenE, elseE = o[0], o[1], o[2]
	case bson.D:
		var seen [3]bool
		for _, e := range o {
			switch e.Key {
			case "if":
				ifE, seen[0] = e.Value, true
			case "then":
				thenE, seen[1] = e.Value, true
			case "else":
				elseE, seen[2] = e.Value, true
			default:
				return nil, errf(17083, "Unrecognized parameter to $cond: %s", e.Key)
			}
		}
		if !seen[0] {
			return nil, errf(17080, "Missing 'if' parameter to $cond")
		}
		if !seen[1] {
			return nil, errf(17081, "Missing 'then' parameter to $cond")
		}
		if !seen[2] {
			return nil, errf(17082, "Missing 'else' parameter to $cond")
		}
	default:
		return nil, errf(16020, "Expression $cond takes exactly 3 arguments. 1 were passed in.")
	}
	c, err := ev.eval(ifE)
	if err != nil {
		return nil, err
	}
	if truthyV(c) {
		return ev.eval(thenE)
	}
	return ev.eval(elseE)
}

func opIfNull(ev *evaluator, operand any) (any, error) {
	raw := rawArgs(operand)
	if len(raw) < 2 {
		return nil, errf(1257300, "$ifNull needs at least two arguments, had: %d", len(raw))
	}
	for i, r := range raw {
		v, err := ev.eval(r)
		if err != nil {
			return nil, err
		}
		if i == len(raw)-1 || !isNullish(v) {
			return v, nil
		}
	}
	return nil, nil
}

func opCmp(name string, res func(int) any) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 2)
		if err != nil {
			return nil, err
		}
		if col := ev.env.collator(); col != nil { // strings compare under the collation
			return res(compareAgg(CollateValue(args[0], col), CollateValue(args[1], col))), nil
		}
		return res(compareAgg(args[0], args[1])), nil
	}
}

// compareAgg is the aggregation comparison: Compare, except that missing
// and undefined sort together below null (only MinKey is lower), so
// {$eq: ["$missing", null]} is false.
func compareAgg(a, b any) int {
	low := func(v any) bool {
		switch v.(type) {
		case missingT, bson.Undefined:
			return true
		}
		return false
	}
	la, lb := low(a), low(b)
	switch {
	case la && lb:
		return 0
	case la:
		if _, ok := b.(bson.MinKey); ok {
			return 1
		}
		return -1
	case lb:
		if _, ok := a.(bson.MinKey); ok {
			return -1
		}
		return 1
	}
	return Compare(a, b)
}

func opAnd(ev *evaluator, operand any) (any, error) {
	for _, r := range rawArgs(operand) {
		v, err := ev.eval(r)
		if err != nil {
			return nil, err
		}
		if !truthyV(v) {
			return false, nil
		}
	}
	return true, nil
}

func opOr(ev *evaluator, operand any) (any, error) {
	for _, r := range rawArgs(operand) {
		v, err := ev.eval(r)
		if err != nil {
			return nil, err
		}
		if truthyV(v) {
			return true, nil
		}
	}
	return false, nil
}

func opNot(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$not", operand, 1)
	if err != nil {
		return nil, err
	}
	return !truthyV(args[0]), nil
}

// opMinMax: one array argument ranges over its elements, several arguments
// over themselves; null and missing are ignored; all-null gives null.
func opMinMax(name string, dir int) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalArgs(operand)
		if err != nil {
			return nil, err
		}
		if len(args) == 1 {
			if a, ok := args[0].(bson.A); ok {
				args = []any(a)
			}
		}
		var best any
		found := false
		for _, a := range args {
			if isNullish(a) {
				continue
			}
			if !found || sgn(Compare(a, best)) == dir {
				best, found = a, true
			}
		}
		if !found {
			return nil, nil
		}
		return best, nil
	}
}

// opSumAvg: expression forms of $sum/$avg; non-numbers are ignored.
func opSumAvg(name string) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalArgs(operand)
		if err != nil {
			return nil, err
		}
		if len(args) == 1 {
			if a, ok := args[0].(bson.A); ok {
				args = []any(a)
			}
		}
		var acc any = int32(0)
		n := 0
		for _, a := range args {
			if !isNum(a) {
				continue
			}
			n++
			if acc, err = arith("+", acc, a); err != nil {
				return nil, err
			}
		}
		if name == "$avg" {
			if n == 0 {
				return nil, nil
			}
			return numFloat(acc) / float64(n), nil
		}
		return acc, nil
	}
}

// ------------------------------------------------------------- strings

func opConcat(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	for _, a := range args {
		if isNullish(a) {
			return nil, nil
		}
		s, ok := a.(string)
		if !ok {
			return nil, errf(16702, "$concat only supports strings, not %s", typeNameOf(a))
		}
		sb.WriteString(s)
	}
	return sb.String(), nil
}

func formatDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func toStringValue(name string, v any) (any, error) {
	switch x := v.(type) {
	case nil, missingT, bson.Undefined:
		return nil, nil
	case string:
		return x, nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		// the server prints doubles with 15 significant digits (%.15g)
		switch {
		case math.IsInf(x, 0), math.IsNaN(x):
			return formatDouble(x), nil
		}
		return strconv.FormatFloat(x, 'g', 15, 64), nil
	case bson.Decimal128:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case bson.ObjectID:
		return x.Hex(), nil
	case bson.DateTime:
		return x.Time().UTC().Format("2006-01-02T15:04:05.000Z"), nil
	case bson.Symbol:
		return string(x), nil
	}
	return nil, errf(241, "Unsupported conversion from %s to string in %s with no onError value", typeNameOf(v), name)
}

func opToString(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$toString", operand, 1)
	if err != nil {
		return nil, err
	}
	return toStringValue("$convert", args[0])
}

func opCase(name string, f func(string) string) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		if isNullish(args[0]) {
			return "", nil
		}
		switch args[0].(type) {
		case string, int32, int64, float64, bson.Decimal128, bson.DateTime, bson.Symbol:
			s, err := toStringValue(name, args[0])
			if err != nil {
				return nil, err
			}
			return f(s.(string)), nil
		}
		return nil, errf(16007, "can't convert from BSON type %s to String", typeNameOf(args[0]))
	}
}

// ------------------------------------------------------------- arrays

func opSize(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$size", operand, 1)
	if err != nil {
		return nil, err
	}
	a, ok := args[0].(bson.A)
	if !ok {
		return nil, errf(17124, "The argument to $size must be an array. Type of the argument was: %s", typeNameOf(args[0]))
	}
	return narrowInt(int64(len(a))), nil
}

func opIn(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$in", operand, 2)
	if err != nil {
		return nil, err
	}
	a, ok := args[1].(bson.A)
	if !ok {
		return nil, errf(40081, "$in requires an array as a second argument, found: %s", typeNameOf(args[1]))
	}
	col := ev.env.collator()
	v := CollateValue(args[0], col)
	for _, x := range a {
		if compareAgg(v, CollateValue(x, col)) == 0 {
			return true, nil
		}
	}
	return false, nil
}

func opArrayElemAt(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$arrayElemAt", operand, 2)
	if err != nil {
		return nil, err
	}
	if isNullish(args[0]) || isNullish(args[1]) {
		return nil, nil
	}
	a, ok := args[0].(bson.A)
	if !ok {
		return nil, errf(28689, "$arrayElemAt's first argument must be an array, but is %s", typeNameOf(args[0]))
	}
	if !isNum(args[1]) || numFloat(args[1]) != math.Trunc(numFloat(args[1])) {
		return nil, errf(28691, "$arrayElemAt's second argument must be a numeric value, but is %s", typeNameOf(args[1]))
	}
	i := numInt(args[1])
	if i < 0 {
		i += int64(len(a))
	}
	if i < 0 || i >= int64(len(a)) {
		return missingV, nil
	}
	return a[i], nil
}

func opFirstLast(name string, first bool) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		if isNullish(args[0]) {
			return nil, nil
		}
		a, ok := args[0].(bson.A)
		if !ok {
			return nil, errf(28689, "%s's argument must be an array, but is %s", name, typeNameOf(args[0]))
		}
		if len(a) == 0 {
			return missingV, nil
		}
		if first {
			return a[0], nil
		}
		return a[len(a)-1], nil
	}
}

func opConcatArrays(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	out := bson.A{}
	for _, a := range args {
		if isNullish(a) {
			return nil, nil
		}
		arr, ok := a.(bson.A)
		if !ok {
			return nil, errf(28664, "$concatArrays only supports arrays, not %s", typeNameOf(a))
		}
		out = append(out, arr...)
	}
	return out, nil
}

func opIsArray(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$isArray", operand, 1)
	if err != nil {
		return nil, err
	}
	_, ok := args[0].(bson.A)
	return ok, nil
}

func opIsNumber(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$isNumber", operand, 1)
	if err != nil {
		return nil, err
	}
	return isNum(args[0]), nil
}

// ------------------------------------------------------------- types

// TypeName is the server's name of the BSON type of a decoded value, as $type and the server's
// "wrong type" error messages spell it ("double", "object", "long", ...).
func TypeName(v any) string { return typeNameOf(v) }

// typeNameOf is the server's $type name of v ("missing" for an absent value).
func typeNameOf(v any) string {
	switch v.(type) {
	case missingT:
		return "missing"
	case nil:
		return "null"
	case float64:
		return "double"
	case string:
		return "string"
	case bson.D, bson.M:
		return "object"
	case bson.A, []any:
		return "array"
	case bson.Binary:
		return "binData"
	case bson.Undefined:
		return "undefined"
	case bson.ObjectID:
		return "objectId"
	case bool:
		return "bool"
	case bson.DateTime:
		return "date"
	case bson.Regex:
		return "regex"
	case bson.DBPointer:
		return "dbPointer"
	case bson.JavaScript:
		return "javascript"
	case bson.Symbol:
		return "symbol"
	case bson.CodeWithScope:
		return "javascriptWithScope"
	case int32, int:
		return "int"
	case bson.Timestamp:
		return "timestamp"
	case int64:
		return "long"
	case bson.Decimal128:
		return "decimal"
	case bson.MinKey:
		return "minKey"
	case bson.MaxKey:
		return "maxKey"
	}
	return fmt.Sprintf("%T", v)
}

func opType(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$type", operand, 1)
	if err != nil {
		return nil, err
	}
	return typeNameOf(args[0]), nil
}

func opConvert(name string) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		v := args[0]
		if isNullish(v) {
			return nil, nil
		}
		target := map[string]string{"$toInt": "int", "$toLong": "long", "$toDouble": "double", "$toBool": "bool"}[name]
		bad := func() error {
			return errf(241, "Unsupported conversion from %s to %s in $convert with no onError value", typeNameOf(v), target)
		}
		if target == "bool" {
			switch v.(type) {
			case bool, int32, int64, float64, bson.Decimal128:
				return truthyV(v), nil
			}
			return true, nil
		}
		var f float64
		isInt := false
		var i int64
		switch x := v.(type) {
		case bool:
			if x {
				i = 1
			}
			isInt = true
		case int32:
			i, isInt = int64(x), true
		case int64:
			i, isInt = x, true
		case float64:
			f = x
		case bson.Decimal128:
			f = numFloat(x)
		case bson.DateTime:
			if target == "int" {
				return nil, bad()
			}
			i, isInt = int64(x), true
		case string:
			if target == "double" {
				p, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
				if err != nil || strings.TrimSpace(x) != x {
					return nil, errf(241, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
				}
				return p, nil
			}
			p, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return nil, errf(241, "Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", x)
			}
			i, isInt = p, true
		default:
			return nil, bad()
		}
		switch target {
		case "double":
			if isInt {
				return float64(i), nil
			}
			return f, nil
		case "long":
			if !isInt {
				if math.IsNaN(f) || f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
					return nil, errf(241, "Conversion would overflow target type in $convert with no onError value: %s", formatDouble(f))
				}
				i = int64(f)
			}
			return i, nil
		default: // int
			if !isInt {
				if math.IsNaN(f) || f >= 2147483648 || f < -2147483648 {
					return nil, errf(241, "Conversion would overflow target type in $convert with no onError value: %s", formatDouble(f))
				}
				i = int64(f)
			}
			if i > math.MaxInt32 || i < math.MinInt32 {
				return nil, errf(241, "Conversion would overflow target type in $convert with no onError value: %d", i)
			}
			return int32(i), nil
		}
	}
}

// ------------------------------------------------------------- objects

func opGetField(ev *evaluator, operand any) (any, error) {
	var fieldE any
	var inputE any = "$$CURRENT"
	if d, ok := operand.(bson.D); ok && (len(d) == 0 || !strings.HasPrefix(d[0].Key, "$")) {
		hasField := false
		for _, e := range d {
			switch e.Key {
			case "field":
				fieldE, hasField = e.Value, true
			case "input":
				inputE = e.Value
			default:
				return nil, errf(3041701, "$getField found an unknown argument: %s", e.Key)
			}
		}
		if !hasField {
			return nil, errf(3041702, "$getField requires 'field' to be specified")
		}
	} else {
		fieldE = operand
	}
	f, err := ev.eval(fieldE)
	if err != nil {
		return nil, err
	}
	name, ok := f.(string)
	if !ok {
		return nil, errf(5654602, "$getField requires 'field' to evaluate to type String, but got %s", typeNameOf(f))
	}
	in, err := ev.eval(inputE)
	if err != nil {
		return nil, err
	}
	if isNullish(in) {
		if isMissing(in) {
			return missingV, nil
		}
		return nil, nil
	}
	d, ok := in.(bson.D)
	if !ok {
		return nil, errf(3041705, "$getField requires 'input' to evaluate to type Object, but got %s", typeNameOf(in))
	}
	for _, e := range d {
		if e.Key == name {
			return e.Value, nil
		}
	}
	return missingV, nil
}

func opMergeObjects(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	out := bson.D{}
	for _, a := range args {
		if isNullish(a) {
			continue
		}
		d, ok := a.(bson.D)
		if !ok {
			return nil, errf(40400, "$mergeObjects requires object inputs, but input %s is of type %s", renderValue(a), typeNameOf(a))
		}
		for _, e := range d {
			out = withField(out, e.Key, e.Value)
		}
	}
	return out, nil
}

// withField returns d with key set to v (in place of an existing key, else
// appended). d is copied, never mutated.
func withField(d bson.D, key string, v any) bson.D {
	out := make(bson.D, len(d), len(d)+1)
	copy(out, d)
	for i := range out {
		if out[i].Key == key {
			out[i].Value = v
			return out
		}
	}
	return append(out, bson.E{Key: key, Value: v})
}

// withoutField returns a copy of d without key.
func withoutField(d bson.D, key string) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return out
}

func docField(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

func opSwitch(ev *evaluator, operand any) (any, error) {
	d, ok := operand.(bson.D)
	if !ok {
		return nil, errf(40060, "$switch requires an object as an argument, found: %s", typeNameOf(operand))
	}
	var branches bson.A
	var def any
	hasDef := false
	for _, e := range d {
		switch e.Key {
		case "branches":
			b, ok := e.Value.(bson.A)
			if !ok {
				return nil, errf(40061, "$switch expected an array for 'branches', found: %s", typeNameOf(e.Value))
			}
			branches = b
		case "default":
			def, hasDef = e.Value, true
		default:
			return nil, errf(40067, "$switch found an unknown argument: %s", e.Key)
		}
	}
	for _, b := range branches {
		bd, ok := b.(bson.D)
		if !ok {
			return nil, errf(40062, "$switch expected each branch to be an object, found: %s", typeNameOf(b))
		}
		caseE, hasCase := docField(bd, "case")
		thenE, hasThen := docField(bd, "then")
		if !hasCase {
			return nil, errf(40064, "$switch requires each branch have a 'case' expression")
		}
		if !hasThen {
			return nil, errf(40065, "$switch requires each branch have a 'then' expression.")
		}
		c, err := ev.eval(caseE)
		if err != nil {
			return nil, err
		}
		if truthyV(c) {
			return ev.eval(thenE)
		}
	}
	if !hasDef {
		return nil, errf(40066, "$switch could not find a matching branch for an input, and no default was specified.")
	}
	return ev.eval(def)
}

func checkVarName(name string) error {
	if name == "" || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 0x80) {
		return errf(16867, "'%s' starts with an invalid character for a user variable name", name)
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r >= 0x80) {
			return errf(16868, "'%s' contains an invalid character for a variable name: '%c'", name, r)
		}
	}
	return nil
}

func opLet(ev *evaluator, operand any) (any, error) {
	d, ok := operand.(bson.D)
	if !ok {
		return nil, errf(16874, "$let only supports an object as its argument")
	}
	var varsD bson.D
	var in any
	hasVars, hasIn := false, false
	for _, e := range d {
		switch e.Key {
		case "vars":
			varsD, hasVars = e.Value.(bson.D)
			if !hasVars {
				return nil, errf(10065, "invalid parameter: expected an object (vars)")
			}
		case "in":
			in, hasIn = e.Value, true
		default:
			return nil, errf(16875, "Unrecognized parameter to $let: %s", e.Key)
		}
	}
	if !hasVars {
		return nil, errf(16876, "Missing 'vars' parameter to $let")
	}
	if !hasIn {
		return nil, errf(16877, "Missing 'in' parameter to $let")
	}
	bound := map[string]any{}
	for _, e := range varsD {
		if err := checkVarName(e.Key); err != nil {
			return nil, err
		}
		v, err := ev.eval(e.Value)
		if err != nil {
			return nil, err
		}
		bound[e.Key] = v
	}
	return ev.with(bound).eval(in)
}

// iterArgs parses {input, as, <body fields>} for $map/$filter.
func iterArgs(name string, operand any, bodyKeys ...string) (input any, as string, body map[string]any, err error) {
	d, ok := operand.(bson.D)
	if !ok {
		return nil, "", nil, errf(16878, "%s only supports an object as its argument", name)
	}
	as = "this"
	body = map[string]any{}
	for _, e := range d {
		switch e.Key {
		case "input":
			input = e.Value
		case "as":
			s, ok := e.Value.(string)
			if !ok {
				return nil, "", nil, errf(16866, "%s 'as' must be a string", name)
			}
			as = s
		default:
			found := false
			for _, k := range bodyKeys {
				if k == e.Key {
					body[k], found = e.Value, true
				}
			}
			if !found {
				return nil, "", nil, errf(16879, "Unrecognized parameter to %s: %s", name, e.Key)
			}
		}
	}
	if input == nil {
		return nil, "", nil, errf(16880, "Missing 'input' parameter to %s", name)
	}
	return input, as, body, checkVarName(as)
}

func opMap(ev *evaluator, operand any) (any, error) {
	inE, as, body, err := iterArgs("$map", operand, "in")
	if err != nil {
		return nil, err
	}
	if _, ok := body["in"]; !ok {
		return nil, errf(16882, "Missing 'in' parameter to $map")
	}
	in, err := ev.eval(inE)
	if err != nil {
		return nil, err
	}
	if isNullish(in) {
		return nil, nil
	}
	arr, ok := in.(bson.A)
	if !ok {
		return nil, errf(16883, "input to $map must be an array not %s", typeNameOf(in))
	}
	out := bson.A{}
	for _, x := range arr {
		v, err := ev.with(map[string]any{as: x}).eval(body["in"])
		if err != nil {
			return nil, err
		}
		if isMissing(v) {
			v = nil
		}
		out = append(out, v)
	}
	return out, nil
}

func opFilter(ev *evaluator, operand any) (any, error) {
	inE, as, body, err := iterArgs("$filter", operand, "cond", "limit")
	if err != nil {
		return nil, err
	}
	if _, ok := body["cond"]; !ok {
		return nil, errf(28648, "Missing 'cond' parameter to $filter")
	}
	in, err := ev.eval(inE)
	if err != nil {
		return nil, err
	}
	if isNullish(in) {
		return nil, nil
	}
	arr, ok := in.(bson.A)
	if !ok {
		return nil, errf(28651, "input to $filter must be an array not %s", typeNameOf(in))
	}
	limit := int64(-1)
	if l, ok := body["limit"]; ok {
		lv, err := ev.eval(l)
		if err != nil {
			return nil, err
		}
		if !isNullish(lv) {
			if !isNum(lv) || numInt(lv) < 1 {
				return nil, errf(327391, "$filter: limit must be greater than 0: %s", renderValue(lv))
			}
			limit = numInt(lv)
		}
	}
	out := bson.A{}
	for _, x := range arr {
		if limit >= 0 && int64(len(out)) >= limit {
			break
		}
		v, err := ev.with(map[string]any{as: x}).eval(body["cond"])
		if err != nil {
			return nil, err
		}
		if truthyV(v) {
			out = append(out, x)
		}
	}
	return out, nil
}

func opReduce(ev *evaluator, operand any) (any, error) {
	d, ok := operand.(bson.D)
	if !ok {
		return nil, errf(40075, "$reduce requires an object as an argument, found: %s", typeNameOf(operand))
	}
	inE, okIn := docField(d, "input")
	initE, okInit := docField(d, "initialValue")
	bodyE, okBody := docField(d, "in")
	if !okIn || !okInit || !okBody {
		return nil, errf(40079, "$reduce requires 'input', 'initialValue' and 'in' to be specified")
	}
	in, err := ev.eval(inE)
	if err != nil {
		return nil, err
	}
	if isNullish(in) {
		return nil, nil
	}
	arr, ok := in.(bson.A)
	if !ok {
		return nil, errf(40080, "$reduce requires that 'input' be an array, found: %s", renderValue(in))
	}
	acc, err := ev.eval(initE)
	if err != nil {
		return nil, err
	}
	for _, x := range arr {
		if acc, err = ev.with(map[string]any{"this": x, "value": acc}).eval(bodyE); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// ------------------------------------------------------------- formatting

// renderElem renders one field as the server's BSONElement::toString does
// in error messages: `a: 1`, `s: "x"`.
func renderElem(key string, v any) string { return key + ": " + renderValue(v) }

// renderValue renders v roughly as the mongo shell does in server error
// messages: {_id: 1, s: "x"}, [1, 2], ObjectId('…').
func renderValue(v any) string {
	var sb strings.Builder
	writeRender(&sb, v)
	return sb.String()
}

func writeRender(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case missingT:
		sb.WriteString("missing")
	case nil:
		sb.WriteString("null")
	case string:
		sb.WriteString(strconv.Quote(x))
	case int32:
		sb.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		sb.WriteString(strconv.FormatInt(x, 10))
	case int:
		sb.WriteString(strconv.Itoa(x))
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			sb.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		} else {
			sb.WriteString(formatDouble(x))
		}
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case bson.D:
		if len(x) == 0 {
			sb.WriteString("{}")
			return
		}
		sb.WriteString("{ ")
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(e.Key)
			sb.WriteString(": ")
			writeRender(sb, e.Value)
		}
		sb.WriteString(" }")
	case bson.A:
		sb.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRender(sb, e)
		}
		sb.WriteString(" ]")
	case bson.ObjectID:
		sb.WriteString("ObjectId('" + x.Hex() + "')")
	case bson.DateTime:
		sb.WriteString("new Date(" + strconv.FormatInt(int64(x), 10) + ")")
	case bson.Timestamp:
		fmt.Fprintf(sb, "Timestamp(%d, %d)", x.T, x.I)
	case bson.Decimal128:
		sb.WriteString("NumberDecimal(\"" + x.String() + "\")")
	default:
		fmt.Fprintf(sb, "%v", x)
	}
}

// checkExpr validates an expression without evaluating it, as the server
// does when it parses a pipeline: unknown operators (168), unsupported
// ones, several operators in one object (15983), $-prefixed field names in
// object literals (16410) and malformed field paths.
func checkExpr(expr any) error {
	switch e := expr.(type) {
	case string:
		if !strings.HasPrefix(e, "$") {
			return nil
		}
		if e == "$" {
			return errf(16872, "'$' by itself is not a valid FieldPath")
		}
		rest := e[1:]
		if strings.HasPrefix(e, "$$") {
			rest = e[2:]
			if rest == "" || rest[0] == '.' {
				return errf(16869, "empty variable name")
			}
		}
		for _, p := range strings.Split(rest, ".") {
			if p == "" {
				return errf(15998, "FieldPath field names may not be empty strings.")
			}
		}
	case bson.D:
		if len(e) > 0 && strings.HasPrefix(e[0].Key, "$") {
			if len(e) != 1 {
				return errf(15983, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s", len(e), renderValue(e))
			}
			name := e[0].Key
			if _, ok := exprOps[name]; !ok {
				if knownUnsupportedExprs[name] {
					return errf(9000001, "mongosim does not support the aggregation expression operator %s", name)
				}
				return errf(168, "Unrecognized expression '%s'", name)
			}
			if name == "$literal" {
				return nil
			}
			return checkExpr(e[0].Value)
		}
		for _, el := range e {
			if strings.HasPrefix(el.Key, "$") {
				return errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
			}
			if err := checkExpr(el.Value); err != nil {
				return err
			}
		}
	case bson.A:
		for _, x := range e {
			if err := checkExpr(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// ------------------------------------------------------------- more operators

func init() {
	more := map[string]opFunc{
		"$strLenBytes":     opStrLen("$strLenBytes", false),
		"$strLenCP":        opStrLen("$strLenCP", true),
		"$substrBytes":     opSubstr("$substrBytes", false),
		"$substr":          opSubstr("$substr", false),
		"$substrCP":        opSubstr("$substrCP", true),
		"$split":           opSplit,
		"$trim":            opTrim("$trim", true, true),
		"$ltrim":           opTrim("$ltrim", true, false),
		"$rtrim":           opTrim("$rtrim", false, true),
		"$strcasecmp":      opStrcasecmp,
		"$round":           opRound,
		"$sqrt":            opMath1("$sqrt", math.Sqrt, func(f float64) bool { return f >= 0 }),
		"$exp":             opMath1("$exp", math.Exp, nil),
		"$ln":              opMath1("$ln", math.Log, func(f float64) bool { return f > 0 }),
		"$log10":           opMath1("$log10", math.Log10, func(f float64) bool { return f > 0 }),
		"$pow":             opPow,
		"$range":           opRange,
		"$reverseArray":    opReverseArray,
		"$indexOfArray":    opIndexOfArray,
		"$objectToArray":   opObjectToArray,
		"$arrayToObject":   opArrayToObject,
		"$setUnion":        opSetUnion,
		"$setIntersection": opSetIntersection,
		"$setDifference":   opSetDifference,
		"$setEquals":       opSetEquals,
		"$setIsSubset":     opSetIsSubset,
		"$allElementsTrue": opElementsTrue("$allElementsTrue", true),
		"$anyElementTrue":  opElementsTrue("$anyElementTrue", false),
		"$toDate":          opToDate,
		"$dateToString":    opDateToString,
		"$dateAdd":         opDateAdd("$dateAdd", 1),
		"$dateSubtract":    opDateAdd("$dateSubtract", -1),
		"$year":            opDatePart("$year", func(t time.Time) int { return t.Year() }),
		"$month":           opDatePart("$month", func(t time.Time) int { return int(t.Month()) }),
		"$dayOfMonth":      opDatePart("$dayOfMonth", func(t time.Time) int { return t.Day() }),
		"$hour":            opDatePart("$hour", func(t time.Time) int { return t.Hour() }),
		"$minute":          opDatePart("$minute", func(t time.Time) int { return t.Minute() }),
		"$second":          opDatePart("$second", func(t time.Time) int { return t.Second() }),
		"$millisecond":     opDatePart("$millisecond", func(t time.Time) int { return t.Nanosecond() / 1e6 }),
		"$dayOfWeek":       opDatePart("$dayOfWeek", func(t time.Time) int { return int(t.Weekday()) + 1 }),
		"$dayOfYear":       opDatePart("$dayOfYear", func(t time.Time) int { return t.YearDay() }),
		"$week":            opDatePart("$week", sundayWeek),
		"$isoWeek":         opDatePart("$isoWeek", func(t time.Time) int { _, w := t.ISOWeek(); return w }),
		"$isoWeekYear":     opDatePart("$isoWeekYear", func(t time.Time) int { y, _ := t.ISOWeek(); return y }),
		"$isoDayOfWeek":    opDatePart("$isoDayOfWeek", isoWeekday),
	}
	for k, f := range more {
		exprOps[k] = f
		delete(knownUnsupportedExprs, k)
	}
}

func opStrLen(name string, codePoints bool) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		s, ok := args[0].(string)
		if !ok {
			return nil, errf(34471, "%s requires a string argument, found: %s", name, typeNameOf(args[0]))
		}
		if codePoints {
			return narrowInt(int64(len([]rune(s)))), nil
		}
		return narrowInt(int64(len(s))), nil
	}
}

func opSubstr(name string, codePoints bool) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 3)
		if err != nil {
			return nil, err
		}
		if isNullish(args[0]) {
			return "", nil
		}
		s, err := toStringValue(name, args[0])
		if err != nil {
			return nil, err
		}
		if !isNum(args[1]) || !isNum(args[2]) {
			return nil, errf(16034, "%s: starting index and length must be numeric types", name)
		}
		start, n := numInt(args[1]), numInt(args[2])
		if codePoints {
			r := []rune(s.(string))
			if start < 0 {
				return nil, errf(34455, "%s: the starting index must be nonnegative integer.", name)
			}
			if start > int64(len(r)) {
				return "", nil
			}
			end := int64(len(r))
			if n >= 0 && start+n < end {
				end = start + n
			}
			return string(r[start:end]), nil
		}
		b := s.(string)
		if start < 0 || start > int64(len(b)) {
			return "", nil
		}
		end := int64(len(b))
		if n >= 0 && start+n < end {
			end = start + n
		}
		return b[start:end], nil
	}
}

func opSplit(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$split", operand, 2)
	if err != nil {
		return nil, err
	}
	if isNullish(args[0]) {
		return nil, nil
	}
	s, ok1 := args[0].(string)
	d, ok2 := args[1].(string)
	if !ok1 {
		return nil, errf(40085, "$split requires an expression that evaluates to a string as a first argument, found: %s", typeNameOf(args[0]))
	}
	if !ok2 {
		return nil, errf(40086, "$split requires an expression that evaluates to a string as a second argument, found: %s", typeNameOf(args[1]))
	}
	if d == "" {
		return nil, errf(40087, "$split requires a non-empty separator")
	}
	out := bson.A{}
	for _, p := range strings.Split(s, d) {
		out = append(out, p)
	}
	return out, nil
}

func opTrim(name string, left, right bool) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		d, ok := operand.(bson.D)
		if !ok {
			return nil, errf(50696, "%s only supports an object as an argument, found: %s", name, typeNameOf(operand))
		}
		inE, hasIn := docField(d, "input")
		if !hasIn {
			return nil, errf(50695, "%s requires an 'input' parameter", name)
		}
		in, err := ev.eval(inE)
		if err != nil {
			return nil, err
		}
		if isNullish(in) {
			return nil, nil
		}
		s, ok := in.(string)
		if !ok {
			return nil, errf(50699, "%s requires its input to be a string, got %s", name, renderValue(in))
		}
		cut := " \t\n\v\f\r\u0000\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
		if cE, ok := docField(d, "chars"); ok {
			c, err := ev.eval(cE)
			if err != nil {
				return nil, err
			}
			if isNullish(c) {
				return nil, nil
			}
			cs, ok := c.(string)
			if !ok {
				return nil, errf(50700, "%s requires 'chars' to be a string, got %s", name, renderValue(c))
			}
			cut = cs
		}
		if left {
			s = strings.TrimLeft(s, cut)
		}
		if right {
			s = strings.TrimRight(s, cut)
		}
		return s, nil
	}
}

func opStrcasecmp(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$strcasecmp", operand, 2)
	if err != nil {
		return nil, err
	}
	var ss [2]string
	for i, a := range args {
		if isNullish(a) {
			continue
		}
		s, err := toStringValue("$strcasecmp", a)
		if err != nil {
			return nil, err
		}
		ss[i] = s.(string)
	}
	return int32(strings.Compare(strings.ToUpper(ss[0]), strings.ToUpper(ss[1]))), nil
}

// opRound rounds half to even at the given decimal place (default 0).
func opRound(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	if len(args) < 1 || len(args) > 2 {
		return nil, errf(28667, "Expression $round takes at least 1 argument, and at most 2, but %d were passed in.", len(args))
	}
	place := int64(0)
	if len(args) == 2 {
		if isNullish(args[1]) {
			return nil, nil
		}
		p, ok := wholeNumber(args[1])
		if !ok || p < -20 || p > 100 {
			return nil, errf(5155301, "$round requires \"place\" argument to be an integer between -20 and 100, but got %s", renderValue(args[1]))
		}
		place = p
	}
	switch x := args[0].(type) {
	case nil, missingT, bson.Undefined:
		return nil, nil
	case int32, int64:
		if place >= 0 {
			return x, nil
		}
		f := math.RoundToEven(numFloat(x)/math.Pow(10, float64(-place))) * math.Pow(10, float64(-place))
		if _, is32 := x.(int32); is32 && f >= math.MinInt32 && f <= math.MaxInt32 {
			return int32(f), nil
		}
		return int64(f), nil
	case float64:
		scale := math.Pow(10, float64(place))
		return math.RoundToEven(x*scale) / scale, nil
	case bson.Decimal128:
		return nil, errDecimal("$round")
	}
	return nil, errf(51081, "$round only supports numeric types, not %s", typeNameOf(args[0]))
}

func opMath1(name string, f func(float64) float64, valid func(float64) bool) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		if isNullish(args[0]) {
			return nil, nil
		}
		if !isNum(args[0]) {
			return nil, errf(28765, "%s only supports numeric types, not %s", name, typeNameOf(args[0]))
		}
		if numRank(args[0]) == 4 {
			return nil, errDecimal(name)
		}
		x := numFloat(args[0])
		if valid != nil && !valid(x) && !math.IsNaN(x) {
			return nil, errf(28714, "%s's argument must be a valid number, but is %s", name, renderValue(args[0]))
		}
		return f(x), nil
	}
}

func opPow(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$pow", operand, 2)
	if err != nil {
		return nil, err
	}
	if isNullish(args[0]) || isNullish(args[1]) {
		return nil, nil
	}
	if !isNum(args[0]) || !isNum(args[1]) {
		return nil, errf(28762, "$pow's base must be numeric, not %s", typeNameOf(args[0]))
	}
	if numRank(args[0]) == 4 || numRank(args[1]) == 4 {
		return nil, errDecimal("$pow")
	}
	r := max(numRank(args[0]), numRank(args[1]))
	b, e := numFloat(args[0]), numFloat(args[1])
	if b == 0 && e < 0 {
		return nil, errf(28764, "$pow cannot take a base of 0 and a negative exponent")
	}
	if r == 3 || e < 0 {
		return math.Pow(b, e), nil
	}
	acc := any(int32(1))
	if r == 2 {
		acc = int64(1)
	}
	for i := int64(0); i < numInt(args[1]); i++ {
		if acc, err = arith("*", acc, args[0]); err != nil {
			return nil, err
		}
		if _, isF := acc.(float64); isF {
			return math.Pow(b, e), nil
		}
	}
	return acc, nil
}

func opRange(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 || len(args) > 3 {
		return nil, errf(28667, "Expression $range takes at least 2 arguments, and at most 3, but %d were passed in.", len(args))
	}
	vals := []int64{0, 0, 1}
	for i, a := range args {
		n, ok := wholeNumber(a)
		if !ok || n > math.MaxInt32 || n < math.MinInt32 {
			return nil, errf(34443+int32(i), "$range requires a numeric argument that can be represented as a 32-bit integer, found: %s", renderValue(a))
		}
		vals[i] = n
	}
	if vals[2] == 0 {
		return nil, errf(34449, "$range requires a non-zero step value")
	}
	out := bson.A{}
	for v := vals[0]; (vals[2] > 0 && v < vals[1]) || (vals[2] < 0 && v > vals[1]); v += vals[2] {
		out = append(out, int32(v))
	}
	return out, nil
}

func arrayArg(name string, v any) (bson.A, bool, error) {
	if isNullish(v) {
		return nil, true, nil
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, false, errf(34435, "The argument to %s must be an array, but was of type: %s", name, typeNameOf(v))
	}
	return a, false, nil
}

func opReverseArray(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$reverseArray", operand, 1)
	if err != nil {
		return nil, err
	}
	a, null, err := arrayArg("$reverseArray", args[0])
	if err != nil || null {
		return nil, err
	}
	out := make(bson.A, len(a))
	for i, x := range a {
		out[len(a)-1-i] = x
	}
	return out, nil
}

func opIndexOfArray(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalArgs(operand)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 || len(args) > 4 {
		return nil, errf(28667, "Expression $indexOfArray takes at least 2 arguments, and at most 4, but %d were passed in.", len(args))
	}
	a, null, err := arrayArg("$indexOfArray", args[0])
	if err != nil || null {
		return nil, err
	}
	start, end := int64(0), int64(len(a))
	if len(args) > 2 {
		n, ok := wholeNumber(args[2])
		if !ok || n < 0 {
			return nil, errf(40097, "$indexOfArray requires an integral starting index, found a value of type: %s", typeNameOf(args[2]))
		}
		start = n
	}
	if len(args) > 3 {
		n, ok := wholeNumber(args[3])
		if !ok || n < 0 {
			return nil, errf(40097, "$indexOfArray requires an integral ending index, found a value of type: %s", typeNameOf(args[3]))
		}
		end = min(n, end)
	}
	for i := start; i < end; i++ {
		if compareAgg(a[i], args[1]) == 0 {
			return narrowInt(i), nil
		}
	}
	return int32(-1), nil
}

func opObjectToArray(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$objectToArray", operand, 1)
	if err != nil {
		return nil, err
	}
	if isNullish(args[0]) {
		return nil, nil
	}
	d, ok := args[0].(bson.D)
	if !ok {
		return nil, errf(40390, "$objectToArray requires a document input, found: %s", typeNameOf(args[0]))
	}
	out := bson.A{}
	for _, e := range d {
		out = append(out, bson.D{{Key: "k", Value: e.Key}, {Key: "v", Value: e.Value}})
	}
	return out, nil
}

func opArrayToObject(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$arrayToObject", operand, 1)
	if err != nil {
		return nil, err
	}
	a, null, err := arrayArg("$arrayToObject", args[0])
	if err != nil || null {
		return nil, err
	}
	out := bson.D{}
	for _, x := range a {
		var k, v any
		switch e := x.(type) {
		case bson.A:
			if len(e) != 2 {
				return nil, errf(40397, "$arrayToObject requires an array of size 2 arrays,found array of size: %d", len(e))
			}
			k, v = e[0], e[1]
		case bson.D:
			kk, ok1 := docField(e, "k")
			vv, ok2 := docField(e, "v")
			if len(e) != 2 || !ok1 || !ok2 {
				return nil, errf(40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%d", len(e))
			}
			k, v = kk, vv
		default:
			return nil, errf(40398, "Unrecognised input type format for $arrayToObject: %s", typeNameOf(x))
		}
		ks, ok := k.(string)
		if !ok {
			return nil, errf(40395, "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: %s", typeNameOf(k))
		}
		out = withField(out, ks, v)
	}
	return out, nil
}

// setArgs evaluates the array arguments of a set operator; null reports
// whether one of them is null or missing.
func setArgs(ev *evaluator, name string, operand any, n int) ([]bson.A, bool, error) {
	var args []any
	var err error
	if n > 0 {
		args, err = ev.evalN(name, operand, n)
	} else {
		args, err = ev.evalArgs(operand)
	}
	if err != nil {
		return nil, false, err
	}
	out := make([]bson.A, len(args))
	null := false
	for i, a := range args {
		if isNullish(a) {
			null = true
			continue
		}
		arr, ok := a.(bson.A)
		if !ok {
			return nil, false, errf(17044, "All operands of %s must be arrays. One argument is of type: %s", name, typeNameOf(a))
		}
		out[i] = arr
	}
	return out, null, nil
}

func dedupe(vals bson.A) (bson.A, map[string]bool) {
	seen := map[string]bool{}
	out := bson.A{}
	for _, v := range vals {
		k := HashKey(v)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out, seen
}

func opSetUnion(ev *evaluator, operand any) (any, error) {
	arrs, null, err := setArgs(ev, "$setUnion", operand, 0)
	if err != nil || null {
		return nil, err
	}
	all := bson.A{}
	for _, a := range arrs {
		all = append(all, a...)
	}
	out, _ := dedupe(all)
	return out, nil
}

func opSetIntersection(ev *evaluator, operand any) (any, error) {
	arrs, null, err := setArgs(ev, "$setIntersection", operand, 0)
	if err != nil || null {
		return nil, err
	}
	if len(arrs) == 0 {
		return bson.A{}, nil
	}
	out, _ := dedupe(arrs[0])
	for _, a := range arrs[1:] {
		_, in := dedupe(a)
		next := bson.A{}
		for _, v := range out {
			if in[HashKey(v)] {
				next = append(next, v)
			}
		}
		out = next
	}
	return out, nil
}

func opSetDifference(ev *evaluator, operand any) (any, error) {
	arrs, null, err := setArgs(ev, "$setDifference", operand, 2)
	if err != nil || null {
		return nil, err
	}
	first, _ := dedupe(arrs[0])
	_, second := dedupe(arrs[1])
	out := bson.A{}
	for _, v := range first {
		if !second[HashKey(v)] {
			out = append(out, v)
		}
	}
	return out, nil
}

func opSetEquals(ev *evaluator, operand any) (any, error) {
	arrs, null, err := setArgs(ev, "$setEquals", operand, 0)
	if err != nil {
		return nil, err
	}
	if null || len(arrs) < 2 {
		return nil, errf(17045, "$setEquals needs at least two arguments had: %d", len(arrs))
	}
	_, first := dedupe(arrs[0])
	for _, a := range arrs[1:] {
		_, s := dedupe(a)
		if len(s) != len(first) {
			return false, nil
		}
		for k := range s {
			if !first[k] {
				return false, nil
			}
		}
	}
	return true, nil
}

func opSetIsSubset(ev *evaluator, operand any) (any, error) {
	arrs, null, err := setArgs(ev, "$setIsSubset", operand, 2)
	if err != nil {
		return nil, err
	}
	if null {
		return nil, errf(17046, "both operands of $setIsSubset must be arrays")
	}
	_, super := dedupe(arrs[1])
	for _, v := range arrs[0] {
		if !super[HashKey(v)] {
			return false, nil
		}
	}
	return true, nil
}

func opElementsTrue(name string, all bool) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		args, err := ev.evalN(name, operand, 1)
		if err != nil {
			return nil, err
		}
		a, ok := args[0].(bson.A)
		if !ok {
			return nil, errf(17040, "%s's argument must be an array, but is %s", name, typeNameOf(args[0]))
		}
		for _, x := range a {
			if truthyV(x) != all {
				return !all, nil
			}
		}
		return all, nil
	}
}

// ------------------------------------------------------------- dates

// location parses a $date* timezone: an Olson name, "UTC"/"GMT", or an
// offset "+hh", "+hhmm", "+hh:mm".
func location(v any) (*time.Location, error) {
	s, ok := v.(string)
	if !ok {
		return nil, errf(40517, "timezone must evaluate to a string, found %s", typeNameOf(v))
	}
	if s == "" || s == "UTC" || s == "GMT" || s == "Z" {
		return time.UTC, nil
	}
	if s[0] == '+' || s[0] == '-' {
		digits := strings.ReplaceAll(s[1:], ":", "")
		if len(digits) == 2 || len(digits) == 4 {
			h, err1 := strconv.Atoi(digits[:2])
			m := 0
			var err2 error
			if len(digits) == 4 {
				m, err2 = strconv.Atoi(digits[2:])
			}
			if err1 == nil && err2 == nil {
				off := (h*60 + m) * 60
				if s[0] == '-' {
					off = -off
				}
				return time.FixedZone(s, off), nil
			}
		}
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, errf(40485, "unrecognized time zone identifier: \"%s\"", s)
	}
	return loc, nil
}

// dateValue converts a date-like value ($toDate rules without strings).
func dateValue(name string, v any) (time.Time, error) {
	switch x := v.(type) {
	case bson.DateTime:
		return x.Time().UTC(), nil
	case bson.Timestamp:
		return time.Unix(int64(x.T), 0).UTC(), nil
	case bson.ObjectID:
		return x.Timestamp().UTC(), nil
	}
	return time.Time{}, errf(16006, "can't convert from BSON type %s to Date", typeNameOf(v))
}

// dateArgs evaluates the {date, timezone} (or bare date) operand of the
// date part operators; ok is false for a null or missing date.
func dateArgs(ev *evaluator, name string, operand any, dateKey string) (time.Time, bool, error) {
	dateE, tzE := operand, any(nil)
	if d, isDoc := operand.(bson.D); isDoc && len(d) > 0 && !strings.HasPrefix(d[0].Key, "$") {
		var has bool
		if dateE, has = docField(d, dateKey); !has {
			return time.Time{}, false, errf(40539, "missing '%s' argument to %s, provided: %s", dateKey, name, renderValue(d))
		}
		tzE, _ = docField(d, "timezone")
	} else if a, isArr := operand.(bson.A); isArr && len(a) == 1 {
		dateE = a[0]
	}
	v, err := ev.eval(dateE)
	if err != nil {
		return time.Time{}, false, err
	}
	if isNullish(v) {
		return time.Time{}, false, nil
	}
	t, err := dateValue(name, v)
	if err != nil {
		return time.Time{}, false, err
	}
	if tzE != nil {
		tz, err := ev.eval(tzE)
		if err != nil {
			return time.Time{}, false, err
		}
		if isNullish(tz) {
			return time.Time{}, false, nil
		}
		loc, err := location(tz)
		if err != nil {
			return time.Time{}, false, err
		}
		t = t.In(loc)
	}
	return t, true, nil
}

func opDatePart(name string, part func(time.Time) int) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		t, ok, err := dateArgs(ev, name, operand, "date")
		if err != nil || !ok {
			return nil, err
		}
		return int32(part(t)), nil
	}
}

// sundayWeek is the week of the year with weeks starting on Sunday (the
// days before the first Sunday are week 0), as %U and $week count.
func sundayWeek(t time.Time) int {
	return (t.YearDay() + 6 - int(t.Weekday())) / 7
}

func isoWeekday(t time.Time) int {
	if t.Weekday() == time.Sunday {
		return 7
	}
	return int(t.Weekday())
}

func opToDate(ev *evaluator, operand any) (any, error) {
	args, err := ev.evalN("$toDate", operand, 1)
	if err != nil {
		return nil, err
	}
	switch x := args[0].(type) {
	case nil, missingT, bson.Undefined:
		return nil, nil
	case bson.DateTime:
		return x, nil
	case int64:
		return bson.DateTime(x), nil
	case float64:
		return bson.DateTime(int64(x)), nil
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, x); err == nil {
				return bson.NewDateTimeFromTime(t), nil
			}
		}
		return nil, errf(241, "Error parsing date string '%s'", x)
	}
	t, err := dateValue("$toDate", args[0])
	if err != nil {
		return nil, errf(241, "Unsupported conversion from %s to date in $convert with no onError value", typeNameOf(args[0]))
	}
	return bson.NewDateTimeFromTime(t), nil
}

func opDateToString(ev *evaluator, operand any) (any, error) {
	d, ok := operand.(bson.D)
	if !ok {
		return nil, errf(18629, "$dateToString only supports an object as its argument")
	}
	format := "%Y-%m-%dT%H:%M:%S.%LZ"
	if fE, ok := docField(d, "format"); ok {
		f, err := ev.eval(fE)
		if err != nil {
			return nil, err
		}
		if isNullish(f) {
			return nil, nil
		}
		fs, ok := f.(string)
		if !ok {
			return nil, errf(18533, "$dateToString requires that 'format' be a string, found: %s with value %s", typeNameOf(f), renderValue(f))
		}
		format = fs
	}
	for _, e := range d {
		switch e.Key {
		case "date", "format", "timezone", "onNull":
		default:
			return nil, errf(18534, "Unrecognized argument to $dateToString: %s", e.Key)
		}
	}
	t, ok, err := dateArgs(ev, "$dateToString", withoutField(withoutField(d, "format"), "onNull"), "date")
	if err != nil {
		return nil, err
	}
	if !ok {
		if onNull, has := docField(d, "onNull"); has {
			return ev.eval(onNull)
		}
		return nil, nil
	}
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			sb.WriteByte(c)
			continue
		}
		if i+1 >= len(format) {
			return nil, errf(18535, "Unmatched '%%' at end of format string")
		}
		i++
		_, off := t.Zone()
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&sb, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(&sb, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&sb, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(&sb, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&sb, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&sb, "%02d", t.Second())
		case 'L':
			fmt.Fprintf(&sb, "%03d", t.Nanosecond()/1e6)
		case 'j':
			fmt.Fprintf(&sb, "%03d", t.YearDay())
		case 'w':
			fmt.Fprintf(&sb, "%d", int(t.Weekday())+1)
		case 'u':
			fmt.Fprintf(&sb, "%d", isoWeekday(t))
		case 'U':
			fmt.Fprintf(&sb, "%02d", sundayWeek(t))
		case 'V':
			_, w := t.ISOWeek()
			fmt.Fprintf(&sb, "%02d", w)
		case 'G':
			y, _ := t.ISOWeek()
			fmt.Fprintf(&sb, "%04d", y)
		case 'z':
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			fmt.Fprintf(&sb, "%c%02d%02d", sign, off/3600, off%3600/60)
		case 'Z':
			fmt.Fprintf(&sb, "%d", off/60)
		case '%':
			sb.WriteByte('%')
		default:
			return nil, errf(18536, "Invalid format character '%%%c' in format string", format[i])
		}
	}
	return sb.String(), nil
}

func opDateAdd(name string, dir int) opFunc {
	return func(ev *evaluator, operand any) (any, error) {
		d, ok := operand.(bson.D)
		if !ok {
			return nil, errf(5166400, "%s expects an object as its argument", name)
		}
		get := func(k string) (any, error) {
			e, ok := docField(d, k)
			if !ok {
				if k == "timezone" {
					return "UTC", nil
				}
				return nil, errf(5166402, "%s requires '%s' to be present", name, k)
			}
			return ev.eval(e)
		}
		start, err := get("startDate")
		if err != nil {
			return nil, err
		}
		unit, err := get("unit")
		if err != nil {
			return nil, err
		}
		amount, err := get("amount")
		if err != nil {
			return nil, err
		}
		tz, err := get("timezone")
		if err != nil {
			return nil, err
		}
		if isNullish(start) || isNullish(unit) || isNullish(amount) || isNullish(tz) {
			return nil, nil
		}
		t, err := dateValue(name, start)
		if err != nil {
			return nil, errf(5166403, "%s requires startDate to be convertible to a date", name)
		}
		n, ok := wholeNumber(amount)
		if !ok {
			return nil, errf(5166405, "%s expects integer amount of time units", name)
		}
		n *= int64(dir)
		loc, err := location(tz)
		if err != nil {
			return nil, err
		}
		t = t.In(loc)
		switch unit {
		case "year":
			t = t.AddDate(int(n), 0, 0)
		case "quarter":
			t = t.AddDate(0, 3*int(n), 0)
		case "month":
			t = t.AddDate(0, int(n), 0)
		case "week":
			t = t.AddDate(0, 0, 7*int(n))
		case "day":
			t = t.AddDate(0, 0, int(n))
		case "hour":
			t = t.Add(time.Duration(n) * time.Hour)
		case "minute":
			t = t.Add(time.Duration(n) * time.Minute)
		case "second":
			t = t.Add(time.Duration(n) * time.Second)
		case "millisecond":
			t = t.Add(time.Duration(n) * time.Millisecond)
		default:
			return nil, errf(5439014, "%s: unknown time unit value: %s", name, renderValue(unit))
		}
		return bson.NewDateTimeFromTime(t), nil
	}
}
