package query

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Pipeline is a compiled aggregation pipeline (without $changeStream, which
// the change-stream code handles itself).
type Pipeline struct {
	stages []*pstage
}

// pstage is one compiled stage. Per-document stages set apply; the others
// set run.
type pstage struct {
	name  string
	apply func(doc bson.D, env *Env) (bson.D, bool, error)
	run   func(docs []bson.D, env *Env) ([]bson.D, error)
}

type stageParser func(spec any) (*pstage, error)

var stageParsers map[string]stageParser

// knownUnsupportedStages are real stages mongosim does not implement.
var knownUnsupportedStages = map[string]bool{
	"$lookup": true, "$graphLookup": true, "$facet": true, "$out": true, "$merge": true,
	"$geoNear": true, "$bucket": true, "$bucketAuto": true, "$sample": true, "$indexStats": true,
	"$collStats": true, "$currentOp": true, "$listSessions": true, "$listLocalSessions": true,
	"$unionWith": true, "$densify": true, "$fill": true, "$setWindowFields": true,
	"$search": true, "$searchMeta": true, "$vectorSearch": true, "$documents": true,
	"$planCacheStats": true, "$changeStreamSplitLargeEvent": true, "$listSearchIndexes": true,
	"$shardedDataDistribution": true, "$listSampledQueries": true, "$querySettings": true,
}

func init() {
	stageParsers = map[string]stageParser{
		"$match":       parseMatchStage,
		"$project":     parseProjectStage,
		"$addFields":   parseAddFieldsStage("$addFields"),
		"$set":         parseAddFieldsStage("$set"),
		"$unset":       parseUnsetStage,
		"$replaceRoot": parseReplaceRootStage("$replaceRoot"),
		"$replaceWith": parseReplaceRootStage("$replaceWith"),
		"$redact":      parseRedactStage,
		"$sort":        parseSortStage,
		"$limit":       parseLimitStage,
		"$skip":        parseSkipStage,
		"$group":       parseGroupStage,
		"$count":       parseCountStage,
		"$unwind":      parseUnwindStage,
		"$sortByCount": parseSortByCountStage,
	}
}

// CompilePipeline validates and compiles stages. Unknown stage names give
// Error 40324; real stages mongosim does not implement give the
// unsupported error (code 9000001) naming the stage.
func CompilePipeline(stages bson.A) (*Pipeline, error) {
	p := &Pipeline{}
	for _, s := range stages {
		d, ok := s.(bson.D)
		if !ok {
			return nil, errf(14, "Each element of the 'pipeline' array must be an object")
		}
		if len(d) != 1 {
			return nil, errf(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := d[0].Key
		parse, ok := stageParsers[name]
		if !ok {
			if knownUnsupportedStages[name] {
				return nil, errf(9000001, "mongosim does not support the %s aggregation stage", name)
			}
			if name == "$changeStream" {
				return nil, errf(40602, "$changeStream is only valid as the first stage in a pipeline")
			}
			return nil, errf(40324, "Unrecognized pipeline stage name: '%s'", name)
		}
		st, err := parse(d[0].Value)
		if err != nil {
			return nil, err
		}
		st.name = name
		p.stages = append(p.stages, st)
	}
	return p, nil
}

// Run runs the whole pipeline over docs (which it does not modify).
func (p *Pipeline) Run(docs []bson.D, env *Env) ([]bson.D, error) {
	cur := docs
	for _, st := range p.stages {
		if st.apply != nil {
			out := make([]bson.D, 0, len(cur))
			for _, d := range cur {
				nd, keep, err := st.apply(d, env)
				if err != nil {
					return nil, err
				}
				if keep {
					out = append(out, nd)
				}
			}
			cur = out
			continue
		}
		var err error
		if cur, err = st.run(cur, env); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// PerDocument reports whether every stage maps one document to zero or one
// documents ($match $project $addFields $set $unset $replaceRoot
// $replaceWith $redact), so that Apply can be used.
func (p *Pipeline) PerDocument() bool {
	for _, st := range p.stages {
		if st.apply == nil {
			return false
		}
	}
	return true
}

// Apply runs a per-document pipeline on one document; keep is false when a
// stage dropped it. It fails when PerDocument is false.
func (p *Pipeline) Apply(doc bson.D, env *Env) (bson.D, bool, error) {
	cur := doc
	for _, st := range p.stages {
		if st.apply == nil {
			return nil, false, errf(9000001, "mongosim does not support the %s stage in a per-document pipeline", st.name)
		}
		nd, keep, err := st.apply(cur, env)
		if err != nil || !keep {
			return nil, false, err
		}
		cur = nd
	}
	return cur, true, nil
}

// ---------------------------------------------------------------- $match

func parseMatchStage(spec any) (*pstage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15959, "the match filter must be an expression in an object")
	}
	f, err := CompileFilter(d)
	if err != nil {
		return nil, err
	}
	return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
		ok, err := f.Match(doc, env)
		return doc, ok, err
	}}, nil
}

// ---------------------------------------------------------------- projections

type projLeaf int

const (
	projNode projLeaf = iota // internal node with children
	projInclude
	projExclude
	projExpr
)

// projTree is a parsed $project/$addFields specification: dotted and
// nested specs are both turned into a tree of fields.
type projTree struct {
	kind     projLeaf
	expr     any
	keys     []string
	children map[string]*projTree
	hasIncl  bool // subtree contains an inclusion
	hasExpr  bool // subtree contains a computed field
}

func newProjTree() *projTree { return &projTree{children: map[string]*projTree{}} }

// add inserts a leaf at a dotted path.
func (t *projTree) add(stage, path string, leaf *projTree) error {
	parts := strings.Split(path, ".")
	cur := t
	for i, p := range parts {
		if p == "" {
			return errf(40352, "Invalid %s :: caused by :: FieldPath cannot be constructed with empty string", stage)
		}
		if strings.HasPrefix(p, "$") {
			return errf(16410, "Invalid %s :: caused by :: FieldPath field names may not start with '$'. Consider using $getField or $setField.", stage)
		}
		last := i == len(parts)-1
		ch, ok := cur.children[p]
		if ok && (last || ch.kind != projNode) {
			return errf(31250, "Invalid %s :: caused by :: Path collision at %s", stage, path)
		}
		if leaf.kind == projInclude {
			cur.hasIncl = true
		}
		if leaf.kind == projExpr {
			cur.hasExpr = true
		}
		if last {
			cur.children[p] = leaf
			cur.keys = append(cur.keys, p)
			break
		}
		if !ok {
			ch = newProjTree()
			cur.children[p] = ch
			cur.keys = append(cur.keys, p)
		}
		cur = ch
	}
	return nil
}

func isExprObject(v any) bool {
	d, ok := v.(bson.D)
	return ok && len(d) > 0 && strings.HasPrefix(d[0].Key, "$")
}

// parseProjSpec fills t from spec. addFields mode makes every leaf a
// computed field; project mode interprets 0/false, 1/true/numbers and
// expressions and tracks inclusion/exclusion (mode: 0 undecided, 1
// inclusion, -1 exclusion).
func parseProjSpec(stage string, t *projTree, spec bson.D, prefix string, addFields bool, mode *int) error {
	for _, e := range spec {
		path := prefix + e.Key
		if sub, ok := e.Value.(bson.D); ok && !isExprObject(sub) {
			if len(sub) == 0 {
				if addFields {
					if err := t.add(stage, path, &projTree{kind: projExpr, expr: bson.D{}}); err != nil {
						return err
					}
					continue
				}
				return errf(51270, "Invalid %s :: caused by :: An empty sub-projection is not a valid value. Found empty object at path", stage)
			}
			if err := parseProjSpec(stage, t, sub, path+".", addFields, mode); err != nil {
				return err
			}
			continue
		}
		leaf := &projTree{kind: projExpr, expr: e.Value}
		if err := checkExpr(e.Value); err != nil {
			return err
		}
		if !addFields {
			switch v := e.Value.(type) {
			case bool:
				leaf = &projTree{kind: projExclude}
				if v {
					leaf = &projTree{kind: projInclude}
				}
			case int32, int64, float64, bson.Decimal128:
				leaf = &projTree{kind: projInclude}
				if numFloat(v) == 0 {
					leaf = &projTree{kind: projExclude}
				}
			}
			isID := path == "_id"
			switch leaf.kind {
			case projExclude:
				if !isID {
					if *mode == 1 {
						return errf(31254, "Invalid %s :: caused by :: Cannot do exclusion on field %s in inclusion projection", stage, path)
					}
					*mode = -1
				}
			case projInclude, projExpr:
				if isID && leaf.kind == projInclude {
					break // {_id: 1} fits both kinds of projection
				}
				if *mode == -1 {
					if leaf.kind == projExpr {
						return errf(31252, "Invalid %s :: caused by :: Cannot use expression other than $meta in exclusion projection", stage)
					}
					return errf(31253, "Invalid %s :: caused by :: Cannot do inclusion on field %s in exclusion projection", stage, path)
				}
				*mode = 1
			}
		}
		if err := t.add(stage, path, leaf); err != nil {
			return err
		}
	}
	return nil
}

// include keeps the included fields of d, in d's order.
func (t *projTree) include(d bson.D) bson.D {
	out := bson.D{}
	for _, e := range d {
		c := t.children[e.Key]
		if c == nil {
			continue
		}
		switch c.kind {
		case projInclude:
			out = append(out, e)
		case projNode:
			if !c.hasIncl {
				continue
			}
			if v, ok := c.includeValue(e.Value); ok {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		}
	}
	return out
}

func (t *projTree) includeValue(v any) (any, bool) {
	switch x := v.(type) {
	case bson.D:
		return t.include(x), true
	case bson.A:
		out := bson.A{}
		for _, el := range x {
			if r, ok := t.includeValue(el); ok {
				out = append(out, r)
			}
		}
		return out, true
	}
	return nil, false
}

// exclude removes the excluded fields of d.
func (t *projTree) exclude(d bson.D) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		c := t.children[e.Key]
		if c == nil {
			out = append(out, e)
			continue
		}
		switch c.kind {
		case projExclude:
			continue
		case projNode:
			out = append(out, bson.E{Key: e.Key, Value: c.excludeValue(e.Value)})
		default:
			out = append(out, e)
		}
	}
	return out
}

func (t *projTree) excludeValue(v any) any {
	switch x := v.(type) {
	case bson.D:
		return t.exclude(x)
	case bson.A:
		out := make(bson.A, 0, len(x))
		for _, el := range x {
			out = append(out, t.excludeValue(el))
		}
		return out
	}
	return v
}

// compute sets the computed fields of t on d (in spec order); expressions
// are evaluated by ev (whose $$CURRENT is the stage's input document). A
// computed value that is missing removes the field.
func (t *projTree) compute(d bson.D, ev *evaluator) (bson.D, error) {
	out := d
	for _, k := range t.keys {
		c := t.children[k]
		switch c.kind {
		case projExpr:
			v, err := ev.eval(c.expr)
			if err != nil {
				return nil, err
			}
			if isMissing(v) {
				out = withoutField(out, k)
			} else {
				out = withField(out, k, v)
			}
		case projNode:
			if !c.hasExpr {
				continue
			}
			cur, _ := docField(out, k)
			nv, err := c.computeValue(cur, ev)
			if err != nil {
				return nil, err
			}
			out = withField(out, k, nv)
		}
	}
	return out, nil
}

func (t *projTree) computeValue(v any, ev *evaluator) (any, error) {
	switch x := v.(type) {
	case bson.D:
		return t.compute(x, ev)
	case bson.A:
		out := make(bson.A, 0, len(x))
		for _, el := range x {
			r, err := t.computeValue(el, ev)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return t.compute(bson.D{}, ev)
}

func parseProjectStage(spec any) (*pstage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15969, "$project specification must be an object")
	}
	if len(d) == 0 {
		return nil, errf(51272, "Invalid $project :: caused by :: projection specification must have at least one field")
	}
	t := newProjTree()
	mode := 0
	if err := parseProjSpec("$project", t, d, "", false, &mode); err != nil {
		return nil, err
	}
	if idLeaf := t.children["_id"]; mode == 0 && idLeaf != nil && idLeaf.kind == projInclude {
		mode = 1 // {_id: 1} alone is an inclusion projection
	}
	if mode == -1 || mode == 0 {
		// exclusion (possibly only {_id: 0})
		return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
			return t.exclude(doc), true, nil
		}}, nil
	}
	if _, ok := t.children["_id"]; !ok {
		t.children["_id"] = &projTree{kind: projInclude}
		t.keys = append([]string{"_id"}, t.keys...)
		t.hasIncl = true
	}
	return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
		out := t.include(doc)
		if t.hasExpr {
			var err error
			if out, err = t.compute(out, newEvaluator(doc, env)); err != nil {
				return nil, false, err
			}
		}
		return out, true, nil
	}}, nil
}

func parseAddFieldsStage(name string) stageParser {
	return func(spec any) (*pstage, error) {
		d, ok := spec.(bson.D)
		if !ok {
			return nil, errf(40272, "%s specification stage must be an object, got %s", name, typeNameOf(spec))
		}
		t := newProjTree()
		mode := 0
		if err := parseProjSpec(name, t, d, "", true, &mode); err != nil {
			return nil, err
		}
		return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
			out, err := t.compute(doc, newEvaluator(doc, env))
			return out, err == nil, err
		}}, nil
	}
}

func parseUnsetStage(spec any) (*pstage, error) {
	var fields []string
	switch s := spec.(type) {
	case string:
		fields = []string{s}
	case bson.A:
		for _, x := range s {
			f, ok := x.(string)
			if !ok {
				return nil, errf(31120, "$unset specification must be a string or an array containing only string values")
			}
			fields = append(fields, f)
		}
	default:
		return nil, errf(31002, "$unset specification must be a string or an array")
	}
	if len(fields) == 0 {
		return nil, errf(31119, "$unset specification must be a string or an array with at least one field")
	}
	t := newProjTree()
	for _, f := range fields {
		if err := t.add("$unset", f, &projTree{kind: projExclude}); err != nil {
			return nil, err
		}
	}
	return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
		return t.exclude(doc), true, nil
	}}, nil
}

func parseReplaceRootStage(name string) stageParser {
	return func(spec any) (*pstage, error) {
		expr := spec
		if name == "$replaceRoot" {
			d, ok := spec.(bson.D)
			if !ok {
				return nil, errf(40228, "expected an object as specification for $replaceRoot stage, got %s", typeNameOf(spec))
			}
			nr, ok := docField(d, "newRoot")
			if !ok || len(d) != 1 {
				if !ok {
					return nil, errf(40231, "no newRoot specified for the $replaceRoot stage")
				}
				return nil, errf(40230, "unrecognized option to $replaceRoot stage: %s", d[0].Key)
			}
			expr = nr
		}
		if err := checkExpr(expr); err != nil {
			return nil, err
		}
		return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
			v, err := evalValue(expr, doc, env)
			if err != nil {
				return nil, false, err
			}
			out, ok := v.(bson.D)
			if !ok {
				return nil, false, errf(40228, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s", renderValue(v), typeNameOf(v), renderValue(doc))
			}
			return out, true, nil
		}}, nil
	}
}

// ---------------------------------------------------------------- $redact

func parseRedactStage(spec any) (*pstage, error) {
	if err := checkExpr(spec); err != nil {
		return nil, err
	}
	return &pstage{apply: func(doc bson.D, env *Env) (bson.D, bool, error) {
		ev := newEvaluator(doc, env)
		return redactDoc(ev, spec, doc)
	}}, nil
}

func redactDoc(ev *evaluator, expr any, d bson.D) (bson.D, bool, error) {
	r, err := ev.with(map[string]any{"CURRENT": d}).eval(expr)
	if err != nil {
		return nil, false, err
	}
	switch r {
	case redactMarker("KEEP"):
		return d, true, nil
	case redactMarker("PRUNE"):
		return nil, false, nil
	case redactMarker("DESCEND"):
		out := make(bson.D, 0, len(d))
		for _, e := range d {
			v, keep, err := redactValue(ev, expr, e.Value)
			if err != nil {
				return nil, false, err
			}
			if keep {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		}
		return out, true, nil
	}
	return nil, false, errf(17053, "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s", renderValue(r))
}

func redactValue(ev *evaluator, expr any, v any) (any, bool, error) {
	switch x := v.(type) {
	case bson.D:
		return redactDoc(ev, expr, x)
	case bson.A:
		out := make(bson.A, 0, len(x))
		for _, el := range x {
			switch el.(type) {
			case bson.D, bson.A:
				r, keep, err := redactValue(ev, expr, el)
				if err != nil {
					return nil, false, err
				}
				if keep {
					out = append(out, r)
				}
			default:
				out = append(out, el)
			}
		}
		return out, true, nil
	}
	return v, true, nil
}

// ---------------------------------------------------------------- $sort $limit $skip

func parseSortStage(spec any) (*pstage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15973, "the $sort key specification must be an object")
	}
	if len(d) == 0 {
		return nil, errf(15976, "$sort stage must have at least one sort key")
	}
	for _, e := range d {
		if _, isMeta := e.Value.(bson.D); isMeta {
			continue
		}
		n, ok := wholeNumber(e.Value)
		if !ok || (n != 1 && n != -1) {
			return nil, errf(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
	}
	return &pstage{run: func(docs []bson.D, env *Env) ([]bson.D, error) {
		out := append([]bson.D(nil), docs...)
		if err := SortDocsCollated(out, d, env.collator()); err != nil {
			return nil, err
		}
		return out, nil
	}}, nil
}

func stageCount(spec any, name string, typeCode, rangeCode int32, positive bool) (int64, error) {
	if !isNum(spec) {
		if name == "$limit" {
			return 0, errf(typeCode, "the limit must be specified as a number")
		}
		return 0, errf(typeCode, "Argument to $skip must be a number.")
	}
	f := numFloat(spec)
	if f != math.Trunc(f) {
		return 0, errf(typeCode, "invalid argument to %s stage: Cannot represent as a 64-bit integer: %s: %s", name, name, renderValue(spec))
	}
	n := numInt(spec)
	if positive && n <= 0 {
		return 0, errf(rangeCode, "the limit must be positive")
	}
	if !positive && n < 0 {
		return 0, errf(rangeCode, "invalid argument to $skip stage: Expected a non-negative number in: $skip: %d", n)
	}
	return n, nil
}

func parseLimitStage(spec any) (*pstage, error) {
	n, err := stageCount(spec, "$limit", 15957, 15958, true)
	if err != nil {
		return nil, err
	}
	return &pstage{run: func(docs []bson.D, env *Env) ([]bson.D, error) {
		if int64(len(docs)) > n {
			return docs[:n], nil
		}
		return docs, nil
	}}, nil
}

func parseSkipStage(spec any) (*pstage, error) {
	n, err := stageCount(spec, "$skip", 15972, 15956, false)
	if err != nil {
		return nil, err
	}
	return &pstage{run: func(docs []bson.D, env *Env) ([]bson.D, error) {
		if int64(len(docs)) <= n {
			return []bson.D{}, nil
		}
		return docs[n:], nil
	}}, nil
}

// ---------------------------------------------------------------- $group

type accSpec struct {
	field string
	op    string
	expr  any
}

var groupAccumulators = map[string]bool{
	"$sum": true, "$avg": true, "$min": true, "$max": true, "$first": true, "$last": true,
	"$push": true, "$addToSet": true, "$count": true, "$mergeObjects": true,
}

var unsupportedAccumulators = map[string]bool{
	"$stdDevPop": true, "$stdDevSamp": true, "$top": true, "$bottom": true, "$topN": true,
	"$bottomN": true, "$firstN": true, "$lastN": true, "$maxN": true, "$minN": true,
	"$accumulator": true, "$median": true, "$percentile": true,
}

type groupSpec struct {
	id   any
	accs []accSpec
}

func parseGroupSpec(spec any) (*groupSpec, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errf(15947, "a group's fields must be specified in an object")
	}
	g := &groupSpec{}
	hasID := false
	for _, e := range d {
		if e.Key == "_id" {
			if err := checkExpr(e.Value); err != nil {
				return nil, err
			}
			g.id, hasID = e.Value, true
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			return nil, errf(40236, "The field name '%s' cannot be an operator name", e.Key)
		}
		if strings.Contains(e.Key, ".") {
			return nil, errf(40235, "The field name '%s' cannot contain '.'", e.Key)
		}
		ad, ok := e.Value.(bson.D)
		if !ok {
			return nil, errf(40234, "The field '%s' must be an accumulator object", e.Key)
		}
		if len(ad) != 1 {
			return nil, errf(40238, "The field '%s' must specify one accumulator", e.Key)
		}
		op := ad[0].Key
		if !groupAccumulators[op] {
			if unsupportedAccumulators[op] {
				return nil, errf(9000001, "mongosim does not support the %s accumulator", op)
			}
			return nil, errf(15952, "unknown group operator '%s'", op)
		}
		if err := checkExpr(ad[0].Value); err != nil {
			return nil, err
		}
		if op == "$count" {
			if cd, ok := ad[0].Value.(bson.D); !ok || len(cd) != 0 {
				return nil, errf(2, "$count takes no arguments, i.e. $count:{}")
			}
		}
		g.accs = append(g.accs, accSpec{field: e.Key, op: op, expr: ad[0].Value})
	}
	if !hasID {
		return nil, errf(15955, "a group specification must include an _id")
	}
	return g, nil
}

type accState struct {
	sum   any
	n     int64
	val   any
	set   bool
	list  bson.A
	seen  map[string]bool
	merge bson.D
}

func (g *groupSpec) run(docs []bson.D, env *Env) ([]bson.D, error) {
	type group struct {
		id     any
		states []*accState
	}
	var order []*group
	byKey := map[string]*group{}
	for _, doc := range docs {
		ev := newEvaluator(doc, env)
		id, err := ev.eval(g.id)
		if err != nil {
			return nil, err
		}
		if isMissing(id) {
			id = nil
		}
		k := HashKey(CollateValue(id, env.collator())) // equal under the collation: one group
		gr := byKey[k]
		if gr == nil {
			gr = &group{id: id, states: make([]*accState, len(g.accs))}
			for i := range gr.states {
				gr.states[i] = &accState{sum: int32(0)}
			}
			byKey[k] = gr
			order = append(order, gr)
		}
		for i, a := range g.accs {
			st := gr.states[i]
			var v any = int32(1)
			if a.op != "$count" {
				if v, err = ev.eval(a.expr); err != nil {
					return nil, err
				}
			}
			if err := accumulate(a.op, st, v); err != nil {
				return nil, err
			}
		}
	}
	out := make([]bson.D, 0, len(order))
	for _, gr := range order {
		d := bson.D{{Key: "_id", Value: gr.id}}
		for i, a := range g.accs {
			d = append(d, bson.E{Key: a.field, Value: finalize(a.op, gr.states[i])})
		}
		out = append(out, d)
	}
	return out, nil
}

func accumulate(op string, st *accState, v any) error {
	var err error
	switch op {
	case "$sum", "$count", "$avg":
		if isNum(v) {
			st.n++
			st.sum, err = arith("+", st.sum, v)
		}
	case "$min", "$max":
		if isNullish(v) {
			return nil
		}
		dir := -1
		if op == "$max" {
			dir = 1
		}
		if !st.set || sgn(Compare(v, st.val)) == dir {
			st.val, st.set = v, true
		}
	case "$first":
		if !st.set {
			st.val, st.set = v, true
		}
	case "$last":
		st.val, st.set = v, true
	case "$push":
		if !isMissing(v) {
			st.list = append(st.list, v)
		}
	case "$addToSet":
		if isMissing(v) {
			return nil
		}
		if st.seen == nil {
			st.seen = map[string]bool{}
		}
		k := HashKey(v)
		if !st.seen[k] {
			st.seen[k] = true
			st.list = append(st.list, v)
		}
	case "$mergeObjects":
		if isNullish(v) {
			return nil
		}
		d, ok := v.(bson.D)
		if !ok {
			return errf(40400, "$mergeObjects requires object inputs, but input %s is of type %s", renderValue(v), typeNameOf(v))
		}
		for _, e := range d {
			st.merge = withField(st.merge, e.Key, e.Value)
		}
	}
	return err
}

func finalize(op string, st *accState) any {
	switch op {
	case "$sum", "$count":
		return st.sum
	case "$avg":
		if st.n == 0 {
			return nil
		}
		return numFloat(st.sum) / float64(st.n)
	case "$min", "$max", "$first", "$last":
		if isMissing(st.val) {
			return nil
		}
		return st.val
	case "$push", "$addToSet":
		if st.list == nil {
			return bson.A{}
		}
		return st.list
	case "$mergeObjects":
		if st.merge == nil {
			return bson.D{}
		}
		return st.merge
	}
	return nil
}

func parseGroupStage(spec any) (*pstage, error) {
	g, err := parseGroupSpec(spec)
	if err != nil {
		return nil, err
	}
	return &pstage{run: g.run}, nil
}

func parseSortByCountStage(spec any) (*pstage, error) {
	if s, ok := spec.(string); ok && !strings.HasPrefix(s, "$") || !ok && !isExprObject(spec) {
		return nil, errf(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
	}
	if err := checkExpr(spec); err != nil {
		return nil, err
	}
	g := &groupSpec{id: spec, accs: []accSpec{{field: "count", op: "$sum", expr: int32(1)}}}
	return &pstage{run: func(docs []bson.D, env *Env) ([]bson.D, error) {
		out, err := g.run(docs, env)
		if err != nil {
			return nil, err
		}
		if err := SortDocs(out, bson.D{{Key: "count", Value: int32(-1)}}); err != nil {
			return nil, err
		}
		return out, nil
	}}, nil
}

// ---------------------------------------------------------------- $count

func parseCountStage(spec any) (*pstage, error) {
	name, ok := spec.(string)
	if !ok {
		return nil, errf(40156, "the count field must be a non-empty string")
	}
	switch {
	case name == "":
		return nil, errf(40157, "the count field must be a non-empty string")
	case strings.HasPrefix(name, "$"):
		return nil, errf(40158, "the count field cannot be a $-prefixed path")
	case strings.Contains(name, "."):
		return nil, errf(40160, "the count field cannot contain '.'")
	}
	return &pstage{run: func(docs []bson.D, env *Env) ([]bson.D, error) {
		if len(docs) == 0 {
			return []bson.D{}, nil
		}
		return []bson.D{{{Key: name, Value: narrowInt(int64(len(docs)))}}}, nil
	}}, nil
}

// ---------------------------------------------------------------- $unwind

func parseUnwindStage(spec any) (*pstage, error) {
	var path, indexField string
	preserve := false
	switch s := spec.(type) {
	case string:
		path = s
	case bson.D:
		for _, e := range s {
			switch e.Key {
			case "path":
				p, ok := e.Value.(string)
				if !ok {
					return nil, errf(28808, "expected a string as the path for $unwind stage, got %s", typeNameOf(e.Value))
				}
				path = p
			case "includeArrayIndex":
				p, ok := e.Value.(string)
				if !ok {
					return nil, errf(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage, got %s", typeNameOf(e.Value))
				}
				if p == "" {
					return nil, errf(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage, got string")
				}
				if strings.HasPrefix(p, "$") {
					return nil, errf(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", p)
				}
				indexField = p
			case "preserveNullAndEmptyArrays":
				b, ok := e.Value.(bool)
				if !ok {
					return nil, errf(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", typeNameOf(e.Value))
				}
				preserve = b
			default:
				return nil, errf(28811, "unrecognized option to $unwind stage: %s", e.Key)
			}
		}
		if path == "" {
			return nil, errf(28812, "no path specified to $unwind stage")
		}
	default:
		return nil, errf(15981, "expected either a string or an object as specification for $unwind stage, got %s", typeNameOf(spec))
	}
	if !strings.HasPrefix(path, "$") || len(path) < 2 {
		return nil, errf(28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	parts := strings.Split(path[1:], ".")
	return &pstage{run: func(docs []bson.D, env *Env) ([]bson.D, error) {
		var out []bson.D
		for _, doc := range docs {
			v, exists := docPathNoArrays(doc, parts)
			withIdx := func(d bson.D, idx any) bson.D {
				if indexField == "" {
					return d
				}
				return setDocPath(d, strings.Split(indexField, "."), idx)
			}
			arr, isArr := v.(bson.A)
			switch {
			case isArr && len(arr) > 0:
				for i, el := range arr {
					out = append(out, withIdx(setDocPath(doc, parts, el), int64(i)))
				}
			case isArr || !exists || v == nil:
				if preserve {
					d := doc
					if isArr {
						d = unsetDocPath(doc, parts)
					}
					out = append(out, withIdx(d, nil))
				}
			default:
				out = append(out, withIdx(doc, nil))
			}
		}
		if out == nil {
			out = []bson.D{}
		}
		return out, nil
	}}, nil
}

// docPathNoArrays follows parts through documents only.
func docPathNoArrays(d bson.D, parts []string) (any, bool) {
	var cur any = d
	for _, p := range parts {
		cd, ok := cur.(bson.D)
		if !ok {
			return nil, false
		}
		if cur, ok = docField(cd, p); !ok {
			return nil, false
		}
	}
	return cur, true
}

// setDocPath returns a copy of d with the value at parts set, creating or
// replacing intermediate documents.
func setDocPath(d bson.D, parts []string, v any) bson.D {
	if len(parts) == 1 {
		return withField(d, parts[0], v)
	}
	sub, _ := docField(d, parts[0])
	sd, ok := sub.(bson.D)
	if !ok {
		sd = bson.D{}
	}
	return withField(d, parts[0], setDocPath(sd, parts[1:], v))
}

func unsetDocPath(d bson.D, parts []string) bson.D {
	if len(parts) == 1 {
		return withoutField(d, parts[0])
	}
	sub, _ := docField(d, parts[0])
	sd, ok := sub.(bson.D)
	if !ok {
		return d
	}
	return withField(d, parts[0], unsetDocPath(sd, parts[1:]))
}
