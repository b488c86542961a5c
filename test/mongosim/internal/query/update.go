package query

import (
	"bytes"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Truncation is one entry of updateDescription.truncatedArrays.
type Truncation struct {
	Field   string // dotted path of the array
	NewSize int32  // its length after the update
}

// UpdateResult is the outcome of ApplyUpdate.
type UpdateResult struct {
	Doc             bson.D       // the new document (the input document itself when nothing changed)
	Changed         bool         // false for a no-op
	Replacement     bool         // the change is logged as a replacement ("replace" event): u was a replacement document, or a pipeline update whose delta is not smaller than the new document (see diff.go)
	UpdatedFields   bson.D       // change-stream updateDescription.updatedFields (dotted paths); never nil
	RemovedFields   []string     // updateDescription.removedFields; never nil
	TruncatedArrays []Truncation // updateDescription.truncatedArrays; never nil
}

// UpdateOptions are the per-statement options of ApplyUpdate.
type UpdateOptions struct {
	Inserting    bool   // the update builds an upserted document: apply $setOnInsert
	ArrayFilters bson.A // the statement's arrayFilters, for $[<identifier>] paths
	Env          *Env   // $$NOW etc. for pipeline updates and $currentDate; nil = wall clock
	Query        bson.D // the statement's filter, for the positional $ operator ("a.$.b"); nil = $ fails
}

// modifier operators, in the order the server lists them.
var updateOps = map[string]bool{
	"$set": true, "$unset": true, "$inc": true, "$mul": true, "$min": true, "$max": true,
	"$rename": true, "$setOnInsert": true, "$currentDate": true, "$push": true, "$pull": true,
	"$pullAll": true, "$addToSet": true, "$pop": true, "$bit": true,
}

// isModifierUpdate reports whether u is an operator-style update (its first
// field starts with '$').
func isModifierUpdate(u bson.D) bool {
	return len(u) > 0 && strings.HasPrefix(u[0].Key, "$")
}

// ValidateUpdate checks u (a bson.D of operators, a replacement bson.D, or a
// bson.A pipeline) without a document: unknown operators (9), empty
// modifiers (9), bad arguments, conflicting paths (40), $-prefixed
// replacement fields (52) and invalid pipeline stages or expressions.
// arrayFilters are checked by ValidateUpdateOptions (and ApplyUpdate).
func ValidateUpdate(u any) error {
	switch x := u.(type) {
	case bson.A:
		_, err := compileUpdatePipeline(x)
		return err
	case bson.D:
		if isModifierUpdate(x) {
			_, err := parseModifiers(x)
			return err
		}
		return validateReplacement(x)
	case nil:
		return errf(9, "Update argument must be either an object or an array")
	}
	return errf(14, "Update argument must be either an object or an array")
}

func validateReplacement(u bson.D) error {
	for _, e := range u {
		if strings.HasPrefix(e.Key, "$") {
			return errf(52, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", e.Key, e.Key)
		}
	}
	return nil
}

// ApplyUpdate applies u to doc and returns the new document with its change
// description. doc is never mutated, and errors carry the server's codes
// (see ValidateUpdate; 14 for $inc/$mul on non-numbers, 28 for paths that
// cannot be created, 66 for _id changes, 2 for array-operator misuse).
// Modifiers are applied in field-name order, so new fields are appended in
// that order; dotted paths create intermediate documents and numeric parts
// index arrays (padding with nulls). Modifier updates report the paths they
// modified the way a $v:2 oplog diff does; pipeline updates report the
// server's delta between the old and the new document, or Replacement when
// that delta is not smaller than the new document; replacement documents
// report no fields (Replacement is true). See diff.go.
func ApplyUpdate(doc bson.D, u any, opts UpdateOptions) (*UpdateResult, error) {
	switch x := u.(type) {
	case bson.A:
		if len(opts.ArrayFilters) > 0 {
			return nil, errf(9, "arrayFilters may not be specified for pipeline-style updates")
		}
		p, err := compileUpdatePipeline(x)
		if err != nil {
			return nil, err
		}
		return applyPipelineUpdate(doc, p, opts)
	case bson.D:
		if isModifierUpdate(x) {
			mods, err := parseModifiers(x)
			if err != nil {
				return nil, err
			}
			return applyModifiers(doc, x, mods, opts)
		}
		if len(opts.ArrayFilters) > 0 {
			return nil, errf(9, "Cannot use array filters with a replacement-style update")
		}
		return applyReplacement(doc, x)
	}
	return nil, ValidateUpdate(u)
}

func newResult(doc bson.D) *UpdateResult {
	return &UpdateResult{Doc: doc, UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []Truncation{}}
}

func applyReplacement(doc bson.D, u bson.D) (*UpdateResult, error) {
	if err := validateReplacement(u); err != nil {
		return nil, err
	}
	res := newResult(nil)
	res.Replacement = true
	oldID, hasOld := docField(doc, "_id")
	newID, hasNew := docField(u, "_id")
	var out bson.D
	switch {
	case hasNew && hasOld && !Equal(oldID, newID):
		return nil, errf(66, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", renderValue(newID))
	case hasNew || !hasOld:
		// the replacement is stored as given (with its own _id, where it put it)
		out = append(bson.D{}, u...)
	default:
		out = make(bson.D, 0, len(u)+1)
		out = append(out, bson.E{Key: "_id", Value: oldID})
		out = append(out, u...)
	}
	res.Doc = out
	// Like the server, only a replacement binary-identical to the stored
	// document (including its _id) is a no-op.
	res.Changed = !identical(doc, u)
	if !res.Changed {
		res.Doc = doc
	}
	return res, nil
}

// ---------------------------------------------------------------- pipeline

var updatePipelineStages = map[string]bool{
	"$addFields": true, "$set": true, "$project": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true,
}

func compileUpdatePipeline(stages bson.A) (*Pipeline, error) {
	for _, s := range stages {
		d, ok := s.(bson.D)
		if ok && len(d) == 1 && !updatePipelineStages[d[0].Key] {
			if _, known := stageParsers[d[0].Key]; known || knownUnsupportedStages[d[0].Key] {
				return nil, errf(72, "%s is not allowed to be used within an update", d[0].Key)
			}
		}
	}
	return CompilePipeline(stages)
}

func applyPipelineUpdate(doc bson.D, p *Pipeline, opts UpdateOptions) (*UpdateResult, error) {
	out, keep, err := p.Apply(doc, opts.Env)
	if err != nil {
		return nil, err
	}
	if !keep {
		return nil, errf(2, "update pipeline produced no document")
	}
	if oldID, ok := docField(doc, "_id"); ok {
		newID, ok := docField(out, "_id")
		switch {
		case !ok: // like a replacement without _id: the original _id stays
			out = append(bson.D{{Key: "_id", Value: oldID}}, out...)
		case !Equal(oldID, newID):
			return nil, errf(66, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", renderValue(newID))
		}
	}
	res := newResult(doc)
	if identical(doc, out) {
		return res, nil
	}
	res.Doc = out
	res.Changed = true
	if delta := computeDocDiff(doc, out, oplogDeltaPadding); delta != nil {
		delta.describe("", res)
	} else {
		// The server logs a replacement when the delta is not smaller
		// than the new document.
		res.Replacement = true
	}
	return res, nil
}

// ---------------------------------------------------------------- modifiers

// modOp is one field of one modifier, e.g. {$inc: {"a.b": 2}}.
type modOp struct {
	op    string
	path  string
	parts []string
	arg   any
	// rename: "from" half (unset) or "to" half (set from the source value)
	renameFrom string
	renameTo   bool
	// $push/$addToSet clauses
	each     bson.A
	hasEach  bool
	slice    *int64
	position *int64
	sortSpec any
	hasSort  bool
}

func parseModifiers(u bson.D) ([]*modOp, error) {
	var mods []*modOp
	var paths []string
	addPath := func(p string) error {
		pp := strings.Split(p, ".")
		for _, q := range paths {
			qp := strings.Split(q, ".")
			n := min(len(pp), len(qp))
			same := true
			for i := 0; i < n; i++ {
				if pp[i] != qp[i] {
					same = false
					break
				}
			}
			if same {
				return errf(40, "Updating the path '%s' would create a conflict at '%s'", p, strings.Join(pp[:n], "."))
			}
		}
		paths = append(paths, p)
		return nil
	}
	for _, e := range u {
		if !updateOps[e.Key] {
			return nil, errf(9, "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", e.Key)
		}
		fields, ok := e.Value.(bson.D)
		if !ok {
			return nil, errf(9, "Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s: %s}", typeNameOf(e.Value), e.Key, renderValue(e.Value))
		}
		// An empty operand ({$set: {}}) is a no-op since 5.0, not an error.
		for _, f := range fields {
			if err := checkUpdatePath(f.Key); err != nil {
				return nil, err
			}
			m := &modOp{op: e.Key, path: f.Key, parts: strings.Split(f.Key, "."), arg: f.Value}
			if err := parseModArg(m); err != nil {
				return nil, err
			}
			if m.op == "$rename" {
				to := f.Value.(string)
				if err := addPath(f.Key); err != nil {
					return nil, err
				}
				if err := addPath(to); err != nil {
					return nil, err
				}
				mods = append(mods, m)
				mods = append(mods, &modOp{op: "$rename", path: to, parts: strings.Split(to, "."), renameFrom: f.Key, renameTo: true})
				continue
			}
			if err := addPath(f.Key); err != nil {
				return nil, err
			}
			mods = append(mods, m)
		}
	}
	return mods, nil
}

func checkUpdatePath(p string) error {
	if p == "" {
		return errf(56, "An empty update path is not valid.")
	}
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return errf(56, "The update path '%s' contains an empty field name, which is not allowed.", p)
		}
		if part == "$" {
			if strings.Count("."+p+".", ".$.") > 1 {
				return errf(2, "Too many positional (i.e. '$') elements found in path '%s'", p)
			}
			if p == "$" || strings.HasPrefix(p, "$.") {
				return errf(2, "Cannot have positional (i.e. '$') element in the first position in path '%s'", p)
			}
			continue
		}
		if strings.HasPrefix(part, "$") && !(strings.HasPrefix(part, "$[") && strings.HasSuffix(part, "]")) {
			return errf(52, "The dollar ($) prefixed field '%s' in '%s' is not valid for storage.", part, p)
		}
	}
	return nil
}

func wholeNumber(v any) (int64, bool) {
	if !isNum(v) {
		return 0, false
	}
	f := numFloat(v)
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return numInt(v), true
}

func parseModArg(m *modOp) error {
	one := func() string { return renderElem(m.path, m.arg) }
	switch m.op {
	case "$inc":
		if !isNum(m.arg) {
			return errf(14, "Cannot increment with non-numeric argument: {%s}", one())
		}
	case "$mul":
		if !isNum(m.arg) {
			return errf(14, "Cannot multiply with non-numeric argument: {%s}", one())
		}
	case "$currentDate":
		switch a := m.arg.(type) {
		case bool:
		case bson.D:
			t, ok := docField(a, "$type")
			if len(a) != 1 || !ok || (t != "date" && t != "timestamp") {
				return errf(2, "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
			}
		default:
			return errf(2, "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).", typeNameOf(m.arg))
		}
	case "$rename":
		to, ok := m.arg.(string)
		if !ok {
			return errf(2, "The 'to' field for $rename must be a string: %s", one())
		}
		if err := checkUpdatePath(to); err != nil {
			return err
		}
		if strings.Contains(m.path, "$") {
			return errf(2, "The source field for $rename may not be dynamic: %s", m.path)
		}
		if strings.Contains(to, "$") {
			return errf(2, "The destination field for $rename may not be dynamic: %s", to)
		}
		if to == m.path {
			return errf(2, "The source and target field for $rename must differ: %s", one())
		}
		if strings.HasPrefix(to, m.path+".") || strings.HasPrefix(m.path, to+".") {
			return errf(2, "The source and target field for $rename must not be on the same path: %s", one())
		}
	case "$bit":
		d, ok := m.arg.(bson.D)
		if !ok {
			return errf(2, "The $bit modifier is not compatible with a %s. You must pass in an embedded document: {$bit: {field: {and/or/xor: #}}", typeNameOf(m.arg))
		}
		if len(d) == 0 {
			return errf(2, "You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}")
		}
		for _, e := range d {
			if e.Key != "and" && e.Key != "or" && e.Key != "xor" {
				return errf(2, "The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s}", e.Key, renderElem(e.Key, e.Value))
			}
			switch e.Value.(type) {
			case int32, int64:
			default:
				return errf(2, "The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: {%s}", typeNameOf(e.Value), renderElem(e.Key, e.Value))
			}
		}
	case "$pop":
		n, ok := wholeNumber(m.arg)
		if !ok || (n != 1 && n != -1) {
			return errf(9, "$pop expects 1 or -1, found: %s", renderValue(m.arg))
		}
	case "$pullAll":
		if _, ok := m.arg.(bson.A); !ok {
			return errf(2, "$pullAll requires an array argument but was given a %s", typeNameOf(m.arg))
		}
	case "$addToSet":
		d, ok := m.arg.(bson.D)
		if !ok || len(d) == 0 || d[0].Key != "$each" {
			return nil
		}
		each, ok := d[0].Value.(bson.A)
		if !ok {
			return errf(14, "The argument to $each in $addToSet must be an array but it was of type %s", typeNameOf(d[0].Value))
		}
		if len(d) > 1 {
			return errf(2, "Found unexpected fields after $each in $addToSet: %s", renderValue(d))
		}
		m.each, m.hasEach = each, true
	case "$push":
		d, ok := m.arg.(bson.D)
		if !ok {
			return nil
		}
		eachV, hasEach := docField(d, "$each")
		if !hasEach {
			return nil
		}
		each, ok := eachV.(bson.A)
		if !ok {
			return errf(2, "The argument to $each in $push must be an array but it was of type: %s", typeNameOf(eachV))
		}
		m.each, m.hasEach = each, true
		seen := map[string]bool{}
		for _, c := range d {
			if seen[c.Key] {
				return errf(2, "Only one %s is supported.", c.Key)
			}
			seen[c.Key] = true
			switch c.Key {
			case "$slice":
				n, ok := wholeNumber(c.Value)
				if !ok {
					return errf(2, "The value for $slice must be an integer value but was given type: %s", typeNameOf(c.Value))
				}
				m.slice = &n
			case "$position":
				n, ok := wholeNumber(c.Value)
				if !ok {
					return errf(2, "The value for $position must be an integer value, not of type: %s", typeNameOf(c.Value))
				}
				m.position = &n
			case "$sort":
				if err := checkPushSort(c.Value); err != nil {
					return err
				}
				m.sortSpec, m.hasSort = c.Value, true
			case "$each":
			default:
				return errf(2, "Unrecognized clause in $push: %s", c.Key)
			}
		}
	}
	return nil
}

func checkPushSort(v any) error {
	bad := errf(2, "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
	switch s := v.(type) {
	case bson.D:
		if len(s) == 0 {
			return errf(2, "The $sort pattern is empty when it should be a set of fields.")
		}
		for _, e := range s {
			n, ok := wholeNumber(e.Value)
			if !ok || (n != 1 && n != -1) {
				return errf(2, "The $sort element value must be either 1 or -1")
			}
			if strings.HasPrefix(e.Key, "$") || e.Key == "" {
				return bad
			}
		}
	default:
		n, ok := wholeNumber(v)
		if !ok || (n != 1 && n != -1) {
			return bad
		}
	}
	return nil
}

// updater carries the state of one modifier update.
type updater struct {
	opts     UpdateOptions
	orig     bson.D
	now      bson.DateTime
	ts       bson.Timestamp
	filters  map[string]*Filter
	used     map[string]bool
	log      []logEntry
	appendOK bool // current op may log appends as "arr.N"
}

func applyModifiers(doc bson.D, u bson.D, mods []*modOp, opts UpdateOptions) (*UpdateResult, error) {
	up := &updater{opts: opts, orig: doc, used: map[string]bool{}}
	now := time.Time{}
	var ct bson.Timestamp
	if opts.Env != nil {
		now, ct = opts.Env.Now, opts.Env.ClusterTime
	}
	if now.IsZero() {
		now = time.Now()
	}
	up.now = bson.NewDateTimeFromTime(now)
	if ct.T == 0 {
		ct = bson.Timestamp{T: uint32(now.Unix()), I: 1}
	}
	up.ts = ct
	if err := up.compileFilters(); err != nil {
		return nil, err
	}
	if err := up.checkFilterUse(u, mods); err != nil {
		return nil, err
	}
	// The server applies the modifications in field-name order, which is
	// also the order new fields are appended in.
	sorted := append([]*modOp(nil), mods...)
	sort.SliceStable(sorted, func(i, j int) bool { return lessParts(sorted[i].parts, sorted[j].parts) })
	cur := doc
	for _, m := range sorted {
		if m.op == "$setOnInsert" && !opts.Inserting {
			continue
		}
		fn, err := up.leafFunc(m)
		if err != nil {
			return nil, err
		}
		if fn == nil {
			continue
		}
		up.appendOK = false
		create := creatingOps[m.op] || (m.op == "$rename" && m.renameTo)
		parts, err := up.resolvePositional(m.parts)
		if err != nil {
			return nil, err
		}
		nv, err := up.walk(cur, parts, upath{}, create, false, fn)
		if err != nil {
			return nil, err
		}
		cur = nv.(bson.D)
	}
	if oldID, ok := docField(doc, "_id"); ok {
		newID, ok := docField(cur, "_id")
		if !ok || !Equal(oldID, newID) {
			p := "_id"
			for _, m := range sorted {
				if m.parts[0] == "_id" {
					p = m.path
					break
				}
			}
			return nil, errf(66, "Performing an update on the path '%s' would modify the immutable field '_id'", p)
		}
	}
	res := newResult(doc)
	if len(up.log) == 0 {
		return res, nil
	}
	res.Doc = cur
	res.Changed = true
	describeLog(cur, up.log, res)
	return res, nil
}

// creatingOps may create missing fields and intermediate documents.
var creatingOps = map[string]bool{
	"$set": true, "$setOnInsert": true, "$inc": true, "$mul": true, "$min": true, "$max": true,
	"$currentDate": true, "$push": true, "$addToSet": true, "$bit": true,
}

// lessParts orders update paths component by component the way the
// server orders the children of its update tree (lessPathPart).
func lessParts(a, b []string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return lessPathPart(a[i], b[i])
		}
	}
	return len(a) < len(b)
}

// lessPathPart compares two field names, ordering names that start with a
// digit (and are not zero-padded) by length first, so array indexes sort
// numerically ("9" < "10"); other names compare bytewise.
func lessPathPart(a, b string) bool {
	isNumLike := func(s string) bool {
		return s != "" && s[0] >= '0' && s[0] <= '9' && !(s[0] == '0' && len(s) > 1)
	}
	if !isNumLike(a) || !isNumLike(b) {
		return a < b
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// filterID parses "$[]" (id "") and "$[name]".
func filterID(part string) (string, bool) {
	if strings.HasPrefix(part, "$[") && strings.HasSuffix(part, "]") {
		return part[2 : len(part)-1], true
	}
	return "", false
}

// resolvePositional replaces the positional "$" of parts by the index of
// the array element the statement's query matched, as the server does: the
// position comes from the query predicates on that array (the last one
// that matched decides).
func (up *updater) resolvePositional(parts []string) ([]string, error) {
	k := -1
	for i, p := range parts {
		if p == "$" {
			k = i
		}
	}
	if k < 0 {
		return parts, nil
	}
	notFound := errf(2, "The positional operator did not find the match needed from the query.")
	if up.opts.Query == nil || up.opts.Inserting {
		return nil, notFound
	}
	arrPath := strings.Join(parts[:k], ".")
	v, ok := GetPath(up.orig, arrPath)
	arr, isArr := v.(bson.A)
	if !ok || !isArr {
		return nil, notFound
	}
	idx := -1
	if err := positionalIndex(up.opts.Query, arrPath, arr, up.opts.Env, &idx); err != nil {
		return nil, err
	}
	if idx < 0 {
		return nil, notFound
	}
	out := append([]string(nil), parts...)
	out[k] = strconv.Itoa(idx)
	return out, nil
}

// positionalIndex looks for predicates of filter on arrPath ("a": cond,
// "a.x": cond, also inside $and) and sets *idx to the first element of arr
// matching each of them in turn.
func positionalIndex(filter bson.D, arrPath string, arr bson.A, env *Env, idx *int) error {
	for _, e := range filter {
		switch {
		case e.Key == "$and":
			clauses, _ := e.Value.(bson.A)
			for _, c := range clauses {
				if cd, ok := c.(bson.D); ok {
					if err := positionalIndex(cd, arrPath, arr, env, idx); err != nil {
						return err
					}
				}
			}
		case e.Key == arrPath || strings.HasPrefix(e.Key, arrPath+"."):
			match, err := elementPredicate(e.Key, arrPath, e.Value)
			if err != nil {
				return err
			}
			for i, el := range arr {
				ok, err := match(el, env)
				if err != nil {
					return err
				}
				if ok {
					*idx = i
					break
				}
			}
		}
	}
	return nil
}

// elementPredicate turns the predicate key: cond (key is arrPath or below
// it) into a test of one array element.
func elementPredicate(key, arrPath string, cond any) (func(any, *Env) (bool, error), error) {
	if key != arrPath {
		f, err := CompileFilter(bson.D{{Key: key[len(arrPath)+1:], Value: cond}})
		if err != nil {
			return nil, err
		}
		return func(el any, env *Env) (bool, error) {
			d, ok := el.(bson.D)
			if !ok {
				return false, nil
			}
			return f.Match(d, env)
		}, nil
	}
	if cd, ok := cond.(bson.D); ok && len(cd) == 1 && cd[0].Key == "$elemMatch" {
		inner, _ := cd[0].Value.(bson.D)
		if len(inner) > 0 && strings.HasPrefix(inner[0].Key, "$") && inner[0].Key != "$and" && inner[0].Key != "$or" && inner[0].Key != "$nor" && inner[0].Key != "$expr" {
			cond = inner
		} else {
			f, err := CompileFilter(inner)
			if err != nil {
				return nil, err
			}
			return func(el any, env *Env) (bool, error) {
				d, ok := el.(bson.D)
				if !ok {
					return false, nil
				}
				return f.Match(d, env)
			}, nil
		}
	}
	f, err := CompileFilter(bson.D{{Key: "v", Value: cond}})
	if err != nil {
		return nil, err
	}
	return func(el any, env *Env) (bool, error) {
		return f.Match(bson.D{{Key: "v", Value: el}}, env)
	}, nil
}

// checkFilterUse requires an array filter for every $[<id>] and a use for
// every array filter.
func (up *updater) checkFilterUse(u bson.D, mods []*modOp) error {
	for _, m := range mods {
		for _, p := range m.parts {
			if id, ok := filterID(p); ok && id != "" {
				if up.filters[id] == nil {
					return errf(2, "No array filter found for identifier '%s' in path '%s'", id, m.path)
				}
				up.used[id] = true
			}
		}
	}
	ids := make([]string, 0, len(up.filters))
	for id := range up.filters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !up.used[id] {
			return errf(9, "The array filter for identifier '%s' was not used in the update %s", id, renderValue(u))
		}
	}
	return nil
}

// ValidateUpdateOptions is ValidateUpdate plus the checks that need the
// statement's options: arrayFilters that do not parse, $[<id>] without a
// filter (2), filters no path uses (9), arrayFilters with a pipeline or a
// replacement (9). The server makes these checks even when no document
// matches.
func ValidateUpdateOptions(u any, opts UpdateOptions) error {
	if err := ValidateUpdate(u); err != nil {
		return err
	}
	d, isDoc := u.(bson.D)
	if !isDoc || !isModifierUpdate(d) {
		if len(opts.ArrayFilters) > 0 {
			if isDoc {
				return errf(9, "Cannot use array filters with a replacement-style update")
			}
			return errf(9, "arrayFilters may not be specified for pipeline-style updates")
		}
		return nil
	}
	mods, err := parseModifiers(d)
	if err != nil {
		return err
	}
	up := &updater{opts: opts, used: map[string]bool{}}
	if err := up.compileFilters(); err != nil {
		return err
	}
	return up.checkFilterUse(d, mods)
}

func (up *updater) compileFilters() error {
	up.filters = map[string]*Filter{}
	for _, f := range up.opts.ArrayFilters {
		d, ok := f.(bson.D)
		if !ok {
			return errf(14, "BSON field 'update.updates.arrayFilters' is the wrong type '%s', expected type 'object'", typeNameOf(f))
		}
		if len(d) == 0 {
			return errf(9, "Cannot use an expression without a top-level field name in arrayFilters")
		}
		id := ""
		for _, e := range d {
			top := strings.SplitN(e.Key, ".", 2)[0]
			if strings.HasPrefix(top, "$") {
				return errf(9, "Cannot use an expression without a top-level field name in arrayFilters")
			}
			if id != "" && top != id {
				return errf(9, "Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", id, top)
			}
			id = top
		}
		if id == "" || !(id[0] >= 'a' && id[0] <= 'z') {
			return errf(2, "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
		}
		for _, r := range id {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return errf(2, "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
			}
		}
		if up.filters[id] != nil {
			return errf(9, "Found multiple array filters with the same top-level field name %s", id)
		}
		cf, err := CompileFilter(d)
		if err != nil {
			return err
		}
		up.filters[id] = cf
	}
	return nil
}

// leafAction is what a leaf function decided.
type leafAction int

const (
	actNone leafAction = iota
	actSet
	actRemove
)

// leafFn computes the new value of the target field from its old value
// (exists false when absent). path is the concrete dotted path.
type leafFn func(old any, exists bool, path string) (any, leafAction, error)

func (up *updater) idString() string {
	if id, ok := docField(up.orig, "_id"); ok {
		return "{" + renderElem("_id", id) + "}"
	}
	return "{no id}"
}

func (up *updater) leafFunc(m *modOp) (leafFn, error) {
	setTo := func(v any) leafFn {
		return func(old any, exists bool, _ string) (any, leafAction, error) {
			if exists && identical(old, v) {
				return nil, actNone, nil
			}
			return v, actSet, nil
		}
	}
	switch m.op {
	case "$set", "$setOnInsert":
		return setTo(m.arg), nil
	case "$unset":
		return func(_ any, exists bool, _ string) (any, leafAction, error) {
			if !exists {
				return nil, actNone, nil
			}
			return nil, actRemove, nil
		}, nil
	case "$inc", "$mul":
		return func(old any, exists bool, path string) (any, leafAction, error) {
			if !exists {
				if m.op == "$inc" {
					return m.arg, actSet, nil
				}
				zero, _ := arith("*", m.arg, int32(0))
				return zero, actSet, nil
			}
			if !isNum(old) {
				return nil, actNone, errf(14, "Cannot apply %s to a value of non-numeric type. %s has the field '%s' of non-numeric type %s", m.op, up.idString(), lastPart(path), typeNameOf(old))
			}
			op := "+"
			if m.op == "$mul" {
				op = "*"
			}
			nv, err := arith(op, old, m.arg)
			if err != nil {
				return nil, actNone, err
			}
			if identical(old, nv) {
				return nil, actNone, nil
			}
			return nv, actSet, nil
		}, nil
	case "$min", "$max":
		dir := -1
		if m.op == "$max" {
			dir = 1
		}
		return func(old any, exists bool, _ string) (any, leafAction, error) {
			if !exists || sgn(Compare(m.arg, old)) == dir {
				return m.arg, actSet, nil
			}
			return nil, actNone, nil
		}, nil
	case "$currentDate":
		var v any = up.now
		if d, ok := m.arg.(bson.D); ok {
			if t, _ := docField(d, "$type"); t == "timestamp" {
				v = up.ts
			}
		}
		// the server always rewrites the field, even with the same value
		return func(any, bool, string) (any, leafAction, error) { return v, actSet, nil }, nil
	case "$rename":
		if !m.renameTo {
			err := up.checkRenamePath(m.path, "source")
			if _, ok := GetPath(up.orig, m.path); !ok {
				if qe, isQ := err.(*Error); isQ && qe.Code == 28 {
					return nil, err
				}
				return nil, nil // a missing source makes the rename a no-op
			}
			if err != nil {
				return nil, err
			}
			if m.parts[0] == "_id" {
				return nil, errf(66, "Unsetting the path '%s' using $rename would modify the immutable field '_id'", m.path)
			}
			return func(_ any, exists bool, _ string) (any, leafAction, error) {
				if !exists {
					return nil, actNone, nil
				}
				return nil, actRemove, nil
			}, nil
		}
		v, ok := GetPath(up.orig, m.renameFrom)
		if !ok {
			return nil, nil
		}
		if err := up.checkRenamePath(m.path, "destination"); err != nil {
			return nil, err
		}
		return func(old any, exists bool, _ string) (any, leafAction, error) {
			if exists && identical(old, v) {
				return nil, actNone, nil
			}
			return v, actSet, nil
		}, nil
	case "$push":
		return func(old any, exists bool, path string) (any, leafAction, error) {
			var arr bson.A
			if exists {
				a, ok := old.(bson.A)
				if !ok {
					return nil, actNone, errf(2, "The field '%s' must be an array but is of type %s in document %s", path, typeNameOf(old), up.idString())
				}
				arr = a
			}
			nv, err := pushValues(arr, m)
			if err != nil {
				return nil, actNone, err
			}
			if exists && identical(old, nv) {
				return nil, actNone, nil
			}
			// Like the server, a push that only appended to a non-empty
			// array is logged element by element, anything else as the
			// whole array.
			added := int64(1)
			if m.hasEach {
				added = int64(len(m.each))
			}
			trimmed := m.slice != nil && absInt64(*m.slice) < int64(len(arr))+added
			up.appendOK = len(arr) > 0 && (m.position == nil || *m.position > int64(len(arr))) && !m.hasSort && !trimmed
			return nv, actSet, nil
		}, nil
	case "$addToSet":
		vals := bson.A{m.arg}
		if m.hasEach {
			vals = m.each
		}
		return func(old any, exists bool, path string) (any, leafAction, error) {
			var arr bson.A
			if exists {
				a, ok := old.(bson.A)
				if !ok {
					return nil, actNone, errf(2, "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", lastPart(path), typeNameOf(old))
				}
				arr = a
			}
			out := append(bson.A{}, arr...)
			for _, v := range vals {
				dup := false
				for _, x := range out {
					if Equal(x, v) {
						dup = true
						break
					}
				}
				if !dup {
					out = append(out, v)
				}
			}
			if exists && len(out) == len(arr) {
				return nil, actNone, nil
			}
			return out, actSet, nil
		}, nil
	case "$bit":
		ops := m.arg.(bson.D)
		return func(old any, exists bool, path string) (any, leafAction, error) {
			var cur any = int32(0)
			if exists {
				switch old.(type) {
				case int32, int64:
					cur = old
				default:
					return nil, actNone, errf(2, "Cannot apply $bit to a value of non-integral type.%s has the field %s of non-integer type %s", up.idString(), lastPart(path), typeNameOf(old))
				}
			}
			for _, e := range ops {
				a, b := numInt(cur), numInt(e.Value)
				var r int64
				switch e.Key {
				case "and":
					r = a & b
				case "or":
					r = a | b
				default:
					r = a ^ b
				}
				_, wide1 := cur.(int64)
				_, wide2 := e.Value.(int64)
				if wide1 || wide2 {
					cur = r
				} else {
					cur = int32(r)
				}
			}
			if exists && identical(old, cur) {
				return nil, actNone, nil
			}
			return cur, actSet, nil
		}, nil
	case "$pop":
		n, _ := wholeNumber(m.arg)
		return func(old any, exists bool, path string) (any, leafAction, error) {
			if !exists {
				return nil, actNone, nil
			}
			a, ok := old.(bson.A)
			if !ok {
				return nil, actNone, errf(14, "Path '%s' contains an element of non-array type '%s'", path, typeNameOf(old))
			}
			if len(a) == 0 {
				return nil, actNone, nil
			}
			if n == 1 {
				return append(bson.A{}, a[:len(a)-1]...), actSet, nil
			}
			return append(bson.A{}, a[1:]...), actSet, nil
		}, nil
	case "$pull", "$pullAll":
		match, err := up.pullMatcher(m)
		if err != nil {
			return nil, err
		}
		return func(old any, exists bool, _ string) (any, leafAction, error) {
			if !exists {
				return nil, actNone, nil
			}
			a, ok := old.(bson.A)
			if !ok {
				return nil, actNone, errf(2, "Cannot apply %s to a non-array value", m.op)
			}
			out := bson.A{}
			for _, x := range a {
				hit, err := match(x)
				if err != nil {
					return nil, actNone, err
				}
				if !hit {
					out = append(out, x)
				}
			}
			if len(out) == len(a) {
				return nil, actNone, nil
			}
			return out, actSet, nil
		}, nil
	}
	return nil, errf(9, "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", m.op)
}

// checkRenamePath rejects $rename paths that go through arrays in the
// original document.
func (up *updater) checkRenamePath(path, which string) error {
	parts := strings.Split(path, ".")
	var cur any = up.orig
	for i, p := range parts[:len(parts)-1] {
		var v any
		var ok bool
		switch c := cur.(type) {
		case bson.D:
			v, ok = docField(c, p)
		case bson.A:
			if n, isIdx := arrIndex(p); isIdx && n < len(c) {
				v, ok = c[n], true
			}
		}
		if !ok {
			return nil
		}
		if _, isArr := v.(bson.A); isArr {
			id := "no id"
			if idv, ok := docField(up.orig, "_id"); ok {
				id = renderElem("_id", idv)
			}
			return errf(2, "The %s field cannot be an array element, '%s' in doc with %s has an array field called '%s'", which, path, id, parts[i])
		}
		switch v.(type) {
		case bson.D:
		default:
			if which == "source" {
				return errf(28, "cannot use the part (%s of %s) to traverse the element ({%s})", parts[i+1], path, renderElem(p, v))
			}
			return nil
		}
		cur = v
	}
	return nil
}

func (up *updater) pullMatcher(m *modOp) (func(any) (bool, error), error) {
	if m.op == "$pullAll" {
		vals := m.arg.(bson.A)
		return func(x any) (bool, error) {
			for _, v := range vals {
				if Equal(x, v) {
					return true, nil
				}
			}
			return false, nil
		}, nil
	}
	cond, isDoc := m.arg.(bson.D)
	if re, isRe := m.arg.(bson.Regex); isRe {
		// a regex pulls the strings it matches
		cond, isDoc = bson.D{{Key: "$regex", Value: re}}, true
	}
	if !isDoc {
		return func(x any) (bool, error) { return Equal(x, m.arg), nil }, nil
	}
	if len(cond) > 0 && strings.HasPrefix(cond[0].Key, "$") && cond[0].Key != "$and" && cond[0].Key != "$or" && cond[0].Key != "$nor" && cond[0].Key != "$expr" {
		// an operator condition on the element value itself
		f, err := CompileFilter(bson.D{{Key: "v", Value: cond}})
		if err != nil {
			return nil, err
		}
		return func(x any) (bool, error) {
			return f.Match(bson.D{{Key: "v", Value: x}}, up.opts.Env)
		}, nil
	}
	f, err := CompileFilter(cond)
	if err != nil {
		return nil, err
	}
	return func(x any) (bool, error) {
		d, ok := x.(bson.D)
		if !ok {
			return false, nil
		}
		return f.Match(d, up.opts.Env)
	}, nil
}

// pushValues applies $push (with $each/$position/$sort/$slice) to arr.
func pushValues(arr bson.A, m *modOp) (bson.A, error) {
	vals := bson.A{m.arg}
	if m.hasEach {
		vals = m.each
	}
	out := make(bson.A, 0, len(arr)+len(vals))
	pos := int64(len(arr))
	if m.position != nil {
		pos = *m.position
		if pos < 0 {
			pos += int64(len(arr))
			if pos < 0 {
				pos = 0
			}
		}
		if pos > int64(len(arr)) {
			pos = int64(len(arr))
		}
	}
	out = append(out, arr[:pos]...)
	out = append(out, vals...)
	out = append(out, arr[pos:]...)
	if m.hasSort {
		sortArrayValues(out, m.sortSpec)
	}
	if m.slice != nil {
		n := *m.slice
		switch {
		case n >= 0 && n < int64(len(out)):
			out = out[:n]
		case n < 0 && -n < int64(len(out)):
			out = out[int64(len(out))+n:]
		}
	}
	return out, nil
}

func sortArrayValues(a bson.A, spec any) {
	if d, ok := spec.(bson.D); ok {
		sort.SliceStable(a, func(i, j int) bool {
			for _, e := range d {
				dir := int(numInt(e.Value))
				vi, vj := subValue(a[i], e.Key), subValue(a[j], e.Key)
				if c := Compare(vi, vj); c != 0 {
					return c*dir < 0
				}
			}
			return false
		})
		return
	}
	dir := int(numInt(spec))
	sort.SliceStable(a, func(i, j int) bool { return Compare(a[i], a[j])*dir < 0 })
}

func subValue(v any, path string) any {
	d, ok := v.(bson.D)
	if !ok {
		return nil
	}
	x, ok := GetPath(d, path)
	if !ok {
		return nil
	}
	return x
}

func absInt64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func lastPart(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func arrIndex(s string) (int, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	return n, true
}

// upath is the concrete path walked so far; idx[i] tells whether parts[i]
// is an array index.
type upath struct {
	parts []string
	idx   []bool
}

// child returns p extended by part (a fresh copy, never aliasing p).
func (p upath) child(part string, isIdx bool) upath {
	n := upath{parts: make([]string, len(p.parts)+1), idx: make([]bool, len(p.idx)+1)}
	copy(n.parts, p.parts)
	copy(n.idx, p.idx)
	n.parts[len(p.parts)], n.idx[len(p.idx)] = part, isIdx
	return n
}

func (p upath) String() string {
	return (logEntry{parts: p.parts}).path()
}

func (p upath) last() string {
	if len(p.parts) == 0 {
		return ""
	}
	return p.parts[len(p.parts)-1]
}

func (up *updater) logAt(p upath, kind logKind, quiet bool) {
	if !quiet {
		up.log = append(up.log, logEntry{parts: p.parts, idx: p.idx, kind: kind})
	}
}

// walk applies fn at parts below cur (a bson.D or bson.A at path at) and
// returns the new cur. create allows creating missing fields and
// intermediate documents; quiet suppresses logging inside a subtree that is
// already logged as a whole.
func (up *updater) walk(cur any, parts []string, at upath, create, quiet bool, fn leafFn) (any, error) {
	part := parts[0]
	if id, ok := filterID(part); ok {
		arr, isArr := cur.(bson.A)
		if !isArr {
			return nil, errf(2, "Cannot apply array updates to non-array element %s: %s", at.last(), renderValue(cur))
		}
		var matching []int
		for i, el := range arr {
			if id != "" {
				ok, err := up.filters[id].Match(bson.D{{Key: id, Value: el}}, up.opts.Env)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
			}
			matching = append(matching, i)
		}
		// Like the server: when several elements match, the elements do not
		// log themselves; the array logs the one modified element whole, or
		// itself whole when more than one changed.
		selfLog := len(matching) <= 1
		out := append(bson.A{}, arr...)
		modified := []int{}
		for _, i := range matching {
			idx := strconv.Itoa(i)
			nv, err := up.walk(out, append([]string{idx}, parts[1:]...), at, create, quiet || !selfLog, fn)
			if err != nil {
				return nil, err
			}
			out = nv.(bson.A)
			if !identical(arr[i], out[i]) {
				modified = append(modified, i)
			}
		}
		switch {
		case selfLog || quiet:
		case len(modified) > 1:
			up.logAt(at, logUpdated, false)
		case len(modified) == 1:
			up.logAt(at.child(strconv.Itoa(modified[0]), true), logUpdated, false)
		}
		return out, nil
	}
	switch c := cur.(type) {
	case bson.D:
		here := at.child(part, false)
		child, exists := docField(c, part)
		if len(parts) == 1 {
			nv, act, err := fn(child, exists, here.String())
			if err != nil {
				return nil, err
			}
			switch act {
			case actSet:
				up.logSetValue(child, exists, nv, here, quiet)
				return withField(c, part, nv), nil
			case actRemove:
				up.logAt(here, logDeleted, quiet)
				return withoutField(c, part), nil
			}
			return c, nil
		}
		if _, next := filterID(parts[1]); next && !exists {
			return nil, errf(2, "The path '%s' must exist in the document in order to apply array updates.", here)
		}
		switch ch := child.(type) {
		case bson.D, bson.A:
			nv, err := up.walk(ch, parts[1:], here, create, quiet, fn)
			if err != nil {
				return nil, err
			}
			return withField(c, part, nv), nil
		}
		if !create {
			return c, nil
		}
		if exists {
			if _, next := filterID(parts[1]); next {
				return nil, errf(2, "Cannot apply array updates to non-array element %s: %s", part, renderValue(child))
			}
			return nil, errf(28, "Cannot create field '%s' in element %s", parts[1], "{"+renderElem(part, child)+"}")
		}
		nv, err := up.walk(bson.D{}, parts[1:], here, create, true, fn)
		if err != nil {
			return nil, err
		}
		up.logAt(here, logCreated, quiet)
		return withField(c, part, nv), nil
	case bson.A:
		idx, ok := arrIndex(part)
		if !ok {
			if !create {
				return c, nil
			}
			return nil, errf(28, "Cannot create field '%s' in element %s", part, "{"+renderElem(at.last(), c)+"}")
		}
		if idx > len(c)+maxArrayPadding {
			return nil, errf(2, "can't backfill more than %d elements", maxArrayPadding)
		}
		here := at.child(part, true)
		var child any
		exists := idx < len(c)
		if exists {
			child = c[idx]
		}
		if len(parts) == 1 {
			nv, act, err := fn(child, exists, here.String())
			if err != nil {
				return nil, err
			}
			switch act {
			case actSet:
				out := append(bson.A{}, c...)
				for len(out) <= idx {
					out = append(out, nil)
				}
				up.logSetValue(child, exists, nv, here, quiet)
				out[idx] = nv
				return out, nil
			case actRemove:
				out := append(bson.A{}, c...)
				out[idx] = nil
				up.logAt(here, logUpdated, quiet)
				return out, nil
			}
			return c, nil
		}
		switch ch := child.(type) {
		case bson.D, bson.A:
			nv, err := up.walk(ch, parts[1:], here, create, quiet, fn)
			if err != nil {
				return nil, err
			}
			out := append(bson.A{}, c...)
			out[idx] = nv
			return out, nil
		}
		if !create {
			return c, nil
		}
		if exists {
			return nil, errf(28, "Cannot create field '%s' in element %s", parts[1], "{"+renderElem(part, child)+"}")
		}
		nv, err := up.walk(bson.D{}, parts[1:], here, create, true, fn)
		if err != nil {
			return nil, err
		}
		out := append(bson.A{}, c...)
		for len(out) <= idx {
			out = append(out, nil)
		}
		out[idx] = nv
		up.logAt(here, logCreated, quiet)
		return out, nil
	}
	return cur, nil
}

// maxArrayPadding is the most nulls an update may add to reach an index.
const maxArrayPadding = 1500000

// logSetValue logs a set; a $push that only appended to a non-empty array
// is logged as its new elements "arr.N", like the server.
func (up *updater) logSetValue(old any, exists bool, nv any, p upath, quiet bool) {
	if quiet {
		return
	}
	if up.appendOK && exists {
		oa, ok1 := old.(bson.A)
		na, ok2 := nv.(bson.A)
		if ok1 && ok2 && len(na) > len(oa) && identical(oa, na[:len(oa)]) {
			for i := len(oa); i < len(na); i++ {
				up.logAt(p.child(strconv.Itoa(i), true), logUpdated, false)
			}
			return
		}
	}
	kind := logUpdated
	if !exists && (len(p.idx) == 0 || !p.idx[len(p.idx)-1]) {
		kind = logCreated
	}
	up.logAt(p, kind, false)
}

// ---------------------------------------------------------------- identity

// identical reports binary equality of two BSON values: same types, same
// values, same field order (1 and 1.0 are not identical).
func identical(a, b any) bool {
	switch x := a.(type) {
	case bson.D:
		y, ok := b.(bson.D)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !identical(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case bson.A:
		y, ok := b.(bson.A)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !identical(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (math.Float64bits(x) == math.Float64bits(y) || x == y && x != 0)
	case bson.Binary:
		y, ok := b.(bson.Binary)
		return ok && x.Subtype == y.Subtype && bytes.Equal(x.Data, y.Data)
	case nil:
		return b == nil
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	return reflect.DeepEqual(a, b)
}
