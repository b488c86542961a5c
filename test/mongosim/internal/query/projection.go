package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type fpKind int

const (
	fpSubtree   fpKind = iota // interior node: a document of child paths
	fpInclude                 // field: 1 / true / non-zero number
	fpExclude                 // field: 0 / false
	fpExpr                    // computed field: aggregation expression
	fpSlice                   // {$slice: n} or {$slice: [skip, limit]}
	fpElemMatch               // {$elemMatch: {...}}, top-level fields only
)

// fpNode is one node of a compiled projection tree.
type fpNode struct {
	kind     fpKind
	names    []string // children in specification order
	children map[string]*fpNode
	expr     any
	// $slice: with hasSkip, skip elements then take limit; otherwise take
	// limit from the front (limit >= 0) or from the back (limit < 0).
	skip, limit int64
	hasSkip     bool
	elem        matchOp
	hasExpr     bool // this subtree contains computed fields
}

func (n *fpNode) child(name string) *fpNode {
	if n.children == nil {
		return nil
	}
	return n.children[name]
}

func (n *fpNode) addChild(name string, c *fpNode) {
	if n.children == nil {
		n.children = map[string]*fpNode{}
	}
	n.children[name] = c
	n.names = append(n.names, name)
}

// findProjection is a compiled find projection.
type findProjection struct {
	root      *fpNode
	inclusion bool
}

// Project applies a find/findAndModify projection to doc and returns a new
// document (doc is not modified). An empty spec returns doc unchanged.
// Supported: inclusion ({a: 1}) or exclusion ({a: 0}) projections with
// dotted paths into subdocuments and arrays of subdocuments, _id included
// unless {_id: 0}, $slice (n or [skip, limit]), $elemMatch on top-level
// fields, and computed fields (any other value, evaluated as an aggregation
// expression with Eval; a missing result omits the field). Mixing inclusion
// and exclusion fails with 31254/31253; path collisions with 31249/31250;
// positional "a.$" and {$meta: ...} are reported as unsupported (code 2).
func Project(doc bson.D, spec bson.D, env *Env) (bson.D, error) {
	if len(spec) == 0 {
		return doc, nil
	}
	p, err := compileFindProjection(spec)
	if err != nil {
		return nil, err
	}
	return p.apply(doc, env)
}

func compileFindProjection(spec bson.D) (*findProjection, error) {
	b := &fpBuilder{root: &fpNode{kind: fpSubtree}}
	if err := b.add("", spec); err != nil {
		return nil, err
	}
	p := &findProjection{root: b.root}
	switch b.mode {
	case fpModeInclusion:
		p.inclusion = true
	case fpModeUnset:
		// Only _id and/or $slice: {_id: 1} alone is an inclusion projection.
		if id := b.root.child("_id"); id != nil && id.kind != fpExclude && id.kind != fpSlice && id.kind != fpSubtree {
			p.inclusion = true
		}
		if id := b.root.child("_id"); id != nil && id.kind == fpSubtree {
			p.inclusion = b.subtreeIncludes(id)
		}
	}
	if p.inclusion && b.root.child("_id") == nil {
		b.root.addChild("_id", &fpNode{kind: fpInclude})
		// _id comes first among the spec names so it is output first.
		names := b.root.names
		copy(names[1:], names[:len(names)-1])
		names[0] = "_id"
	}
	fpMarkExprs(b.root)
	return p, nil
}

const (
	fpModeUnset = iota
	fpModeInclusion
	fpModeExclusion
)

type fpBuilder struct {
	root *fpNode
	mode int
}

func (b *fpBuilder) subtreeIncludes(n *fpNode) bool {
	for _, name := range n.names {
		c := n.children[name]
		switch c.kind {
		case fpInclude, fpExpr, fpElemMatch:
			return true
		case fpSubtree:
			if b.subtreeIncludes(c) {
				return true
			}
		}
	}
	return false
}

func fpMarkExprs(n *fpNode) bool {
	for _, name := range n.names {
		c := n.children[name]
		if c.kind == fpExpr || c.kind == fpSubtree && fpMarkExprs(c) {
			n.hasExpr = true
		}
	}
	return n.hasExpr
}

func (b *fpBuilder) add(prefix string, spec bson.D) error {
	for _, e := range spec {
		if e.Key == "" {
			return errf(40352, "FieldPath cannot be constructed with empty string")
		}
		path := prefix + e.Key
		parts := splitPath(path)
		for _, p := range parts {
			if p == "$" {
				return errf(codeBadValue, "positional projection '%s' is not supported by mongosim", path)
			}
			if p == "" {
				return errf(15998, "FieldPath field names may not be empty strings.")
			}
			if strings.HasPrefix(p, "$") {
				return errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
			}
		}
		n, err := b.leaf(path, e.Value)
		if err != nil {
			return err
		}
		if n == nil { // nested sub-projection
			if err := b.add(path+".", e.Value.(bson.D)); err != nil {
				return err
			}
			continue
		}
		if err := b.setMode(path, n.kind); err != nil {
			return err
		}
		if err := b.insert(parts, n); err != nil {
			return err
		}
	}
	return nil
}

// leaf classifies a projection value; nil means a nested sub-projection.
func (b *fpBuilder) leaf(path string, v any) (*fpNode, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return &fpNode{kind: fpInclude}, nil
		}
		return &fpNode{kind: fpExclude}, nil
	case int32, int64, float64, bson.Decimal128:
		if compareNumbers(x, int32(0)) == 0 {
			return &fpNode{kind: fpExclude}, nil
		}
		return &fpNode{kind: fpInclude}, nil
	case bson.D:
		if len(x) == 0 {
			return nil, errf(51270, "An empty sub-projection is not a valid value. Found empty object at path")
		}
		if !strings.HasPrefix(x[0].Key, "$") {
			return nil, nil
		}
		switch x[0].Key {
		case "$slice":
			if len(x) > 1 {
				return nil, errf(codeBadValue, "$slice projection for '%s' must be the only field of its object", path)
			}
			return fpCompileSlice(path, x[0].Value)
		case "$elemMatch":
			if strings.Contains(path, ".") {
				return nil, errf(31275, "Cannot use $elemMatch projection on a nested field.")
			}
			if len(x) > 1 {
				return nil, errf(codeBadValue, "$elemMatch projection for '%s' must be the only field of its object", path)
			}
			if _, ok := x[0].Value.(bson.D); !ok {
				return nil, errf(31274, "elemMatch: Invalid argument, object required, but got %T", x[0].Value)
			}
			o, err := compileElemMatch(x[0].Value)
			if err != nil {
				return nil, err
			}
			return &fpNode{kind: fpElemMatch, elem: o}, nil
		case "$meta":
			return nil, errf(codeBadValue, "projection {$meta: ...} on '%s' is not supported by mongosim", path)
		}
		if err := checkExpr(x); err != nil {
			return nil, err
		}
		return &fpNode{kind: fpExpr, expr: x}, nil
	}
	if err := checkExpr(v); err != nil {
		return nil, err
	}
	return &fpNode{kind: fpExpr, expr: v}, nil
}

func fpCompileSlice(path string, v any) (*fpNode, error) {
	if isNumber(v) {
		n, ok := truncInt64(v)
		if !ok {
			return nil, errf(codeBadValue, "$slice for '%s' must be a finite number", path)
		}
		return &fpNode{kind: fpSlice, limit: n}, nil
	}
	arr, ok := v.(bson.A)
	if !ok || len(arr) != 2 || !isNumber(arr[0]) || !isNumber(arr[1]) {
		return nil, errf(28667, "$slice for '%s' takes a number or an array of two numbers [skip, limit]", path)
	}
	skip, ok1 := truncInt64(arr[0])
	limit, ok2 := truncInt64(arr[1])
	if !ok1 || !ok2 {
		return nil, errf(codeBadValue, "$slice for '%s' must use finite numbers", path)
	}
	if limit <= 0 {
		return nil, errf(28724, "$slice limit must be positive")
	}
	return &fpNode{kind: fpSlice, skip: skip, limit: limit, hasSkip: true}, nil
}

func (b *fpBuilder) setMode(path string, k fpKind) error {
	isID := path == "_id"
	switch k {
	case fpInclude, fpExpr, fpElemMatch:
		if isID && k == fpInclude {
			return nil
		}
		if b.mode == fpModeExclusion {
			return errf(31253, "Cannot do inclusion on field %s in exclusion projection", path)
		}
		b.mode = fpModeInclusion
	case fpExclude:
		if isID {
			return nil
		}
		if b.mode == fpModeInclusion {
			return errf(31254, "Cannot do exclusion on field %s in inclusion projection", path)
		}
		b.mode = fpModeExclusion
	}
	return nil
}

func (b *fpBuilder) insert(parts []string, leaf *fpNode) error {
	n := b.root
	for i, p := range parts[:len(parts)-1] {
		c := n.child(p)
		if c == nil {
			c = &fpNode{kind: fpSubtree}
			n.addChild(p, c)
		} else if c.kind != fpSubtree {
			return errf(31249, "Path collision at %s remaining portion %s", strings.Join(parts, "."), strings.Join(parts[i+1:], "."))
		}
		n = c
	}
	last := parts[len(parts)-1]
	if n.child(last) != nil {
		return errf(31250, "Path collision at %s", strings.Join(parts, "."))
	}
	n.addChild(last, leaf)
	return nil
}

func (p *findProjection) apply(doc bson.D, env *Env) (bson.D, error) {
	if p.inclusion {
		return fpIncludeDoc(doc, p.root, doc, env)
	}
	return fpExcludeDoc(doc, p.root), nil
}

// fpIncludeDoc keeps the fields of d named by n (in d's order), then appends
// n's computed fields in specification order.
func fpIncludeDoc(d bson.D, n *fpNode, root bson.D, env *Env) (bson.D, error) {
	out := bson.D{}
	for _, e := range d {
		c := n.child(e.Key)
		if c == nil {
			continue
		}
		switch c.kind {
		case fpInclude:
			out = append(out, e)
		case fpSlice:
			out = append(out, bson.E{Key: e.Key, Value: fpSliceValue(e.Value, c)})
		case fpElemMatch:
			if v, ok, err := fpElemMatchValue(e.Value, c, env); err != nil {
				return nil, err
			} else if ok {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		case fpSubtree:
			v, keep, err := fpIncludeValue(e.Value, c, root, env)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		}
	}
	if !n.hasExpr {
		return out, nil
	}
	for _, name := range n.names {
		c := n.children[name]
		switch {
		case c.kind == fpExpr:
			v, missing, err := fpEval(c.expr, root, env)
			if err != nil {
				return nil, err
			}
			if !missing {
				out = append(out, bson.E{Key: name, Value: v})
			}
		case c.kind == fpSubtree && c.hasExpr:
			if _, present := lookupField(out, name); present {
				continue
			}
			sub, err := fpIncludeDoc(bson.D{}, c, root, env)
			if err != nil {
				return nil, err
			}
			out = append(out, bson.E{Key: name, Value: sub})
		}
	}
	return out, nil
}

// fpIncludeValue applies an interior projection node to a value: documents
// recurse, arrays map over their elements (dropping scalars), scalars are
// dropped unless the subtree computes fields.
func fpIncludeValue(v any, n *fpNode, root bson.D, env *Env) (any, bool, error) {
	switch x := v.(type) {
	case bson.D:
		d, err := fpIncludeDoc(x, n, root, env)
		return d, err == nil, err
	case bson.A:
		out := bson.A{}
		for _, e := range x {
			switch e.(type) {
			case bson.D, bson.A:
				v, keep, err := fpIncludeValue(e, n, root, env)
				if err != nil {
					return nil, false, err
				}
				if keep {
					out = append(out, v)
				}
			default:
				if n.hasExpr {
					d, err := fpIncludeDoc(bson.D{}, n, root, env)
					if err != nil {
						return nil, false, err
					}
					out = append(out, d)
				}
			}
		}
		return out, true, nil
	}
	if n.hasExpr {
		d, err := fpIncludeDoc(bson.D{}, n, root, env)
		return d, err == nil, err
	}
	return nil, false, nil
}

// fpExcludeDoc removes the fields named by exclusion leaves, applying $slice
// and recursing through documents and arrays for interior nodes.
func fpExcludeDoc(d bson.D, n *fpNode) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		c := n.child(e.Key)
		if c == nil {
			out = append(out, e)
			continue
		}
		switch c.kind {
		case fpExclude:
		case fpSlice:
			out = append(out, bson.E{Key: e.Key, Value: fpSliceValue(e.Value, c)})
		case fpSubtree:
			out = append(out, bson.E{Key: e.Key, Value: fpExcludeValue(e.Value, c)})
		default:
			out = append(out, e)
		}
	}
	return out
}

func fpExcludeValue(v any, n *fpNode) any {
	switch x := v.(type) {
	case bson.D:
		return fpExcludeDoc(x, n)
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = fpExcludeValue(e, n)
		}
		return out
	}
	return v
}

// fpSliceValue applies $slice to an array; other values are returned as is.
func fpSliceValue(v any, n *fpNode) any {
	arr, ok := v.(bson.A)
	if !ok {
		return v
	}
	size := int64(len(arr))
	var start, end int64
	switch {
	case n.hasSkip:
		start = n.skip
		if start < 0 {
			start = max(size+start, 0)
		}
		start = min(start, size)
		end = min(start+n.limit, size)
	case n.limit >= 0:
		end = min(n.limit, size)
	default:
		start = max(size+n.limit, 0)
		end = size
	}
	out := make(bson.A, end-start)
	copy(out, arr[start:end])
	return out
}

// fpElemMatchValue returns the first element of an array matching a
// $elemMatch projection, wrapped in a one-element array.
func fpElemMatchValue(v any, n *fpNode, env *Env) (any, bool, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, false, nil
	}
	for _, e := range arr {
		ok, err := n.elem.single(bson.A{e}, false, env)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return bson.A{e}, true, nil
		}
	}
	return nil, false, nil
}

// fpEval evaluates a computed projection field; missing reports a
// result that should omit the field (a missing field path or $$REMOVE).
func fpEval(expr any, root bson.D, env *Env) (any, bool, error) {
	v, err := evalValue(expr, root, env)
	if err != nil {
		return nil, false, err
	}
	if isMissing(v) {
		return nil, true, nil
	}
	return v, false, nil
}
