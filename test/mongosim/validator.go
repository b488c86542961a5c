package mongosim

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// codeDocumentValidationFailure is the server's code for a write its validator refuses.
const codeDocumentValidationFailure = 121

// validator is a collection's document validator: query operators, a $jsonSchema, or both
// (the schema as one clause of the top-level conjunction).
type validator struct {
	spec   bson.D
	filter *query.Filter // the query-operator clauses; nil when there are none
	query  bson.D
	schema *jsonSchema // nil when there is none
}

// compileValidator parses a validator document.
func compileValidator(d bson.D) (*validator, *cmdError) {
	v := &validator{spec: d}
	for _, f := range d {
		if f.Key == "$jsonSchema" {
			s, err := compileSchema(f.Value)
			if err != nil {
				return nil, err
			}
			v.schema = s
			continue
		}
		switch f.Key {
		case "$where", "$text", "$near", "$nearSphere", "$expr":
			if f.Key != "$expr" {
				return nil, errorf(codeBadValue, "%s is not allowed in collection validators", f.Key)
			}
		}
		v.query = append(v.query, f)
	}
	if len(v.query) > 0 {
		flt, err := query.CompileFilter(v.query)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		v.filter = flt
	}
	return v, nil
}

// check returns nil when doc passes, else the errInfo details of the failure.
func (v *validator) check(doc bson.D, env *query.Env) (bson.D, *cmdError) {
	if v.schema != nil {
		if rules := v.schema.failures(doc); len(rules) > 0 {
			return bson.D{{Key: "operatorName", Value: "$jsonSchema"}, {Key: "schemaRulesNotSatisfied", Value: rules}}, nil
		}
	}
	if v.filter != nil {
		ok, err := v.filter.Match(doc, env)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		if !ok {
			return queryFailureDetails(v.query, doc, env), nil
		}
	}
	return nil, nil
}

// queryFailureDetails describes which clauses of a query validator doc fails, in the shape of
// a server's errInfo.details: one clause's {operatorName, specifiedAs, reason}, or $and with
// clausesNotSatisfied when the validator has several.
func queryFailureDetails(q bson.D, doc bson.D, env *query.Env) bson.D {
	clause := func(e bson.E) bson.D {
		op := "$eq"
		if sub, ok := e.Value.(bson.D); ok && len(sub) > 0 && strings.HasPrefix(sub[0].Key, "$") {
			op = sub[0].Key
		}
		if strings.HasPrefix(e.Key, "$") {
			op = e.Key
		}
		d := bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: bson.D{e}}}
		if !strings.HasPrefix(e.Key, "$") {
			if v, ok := lookupPath(doc, e.Key); ok {
				d = append(d, bson.E{Key: "reason", Value: "comparison failed"}, bson.E{Key: "consideredValue", Value: v})
			} else {
				d = append(d, bson.E{Key: "reason", Value: "field was missing"})
			}
		} else {
			d = append(d, bson.E{Key: "reason", Value: "expression did not match"})
		}
		return d
	}
	if len(q) == 1 {
		return clause(q[0])
	}
	var failed bson.A
	for i, e := range q {
		if ok, err := query.Match(bson.D{e}, doc, env); err == nil && !ok {
			failed = append(failed, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: clause(e)}})
		}
	}
	return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "clausesNotSatisfied", Value: failed}}
}

// validate applies coll's validator to doc, the new version of old (nil for an insert): it
// returns DocumentValidationFailure (121) with errInfo {failingDocumentId, details}, unless
// the command bypasses validation, the level is off, the level is moderate and old already
// failed, or the action is warn.
func (w *writeCtx) validate(coll *collection, doc, old bson.D) *cmdError {
	k := coll.kind
	if k == nil || k.validator == nil || k.validationLevel == "off" || w.bypassValidation() {
		return nil
	}
	details, err := k.validator.check(doc, w.env)
	if err != nil || details == nil {
		return err
	}
	if old != nil && k.validationLevel == "moderate" {
		if oldDetails, _ := k.validator.check(old, w.env); oldDetails != nil {
			return nil // moderate: documents that were already invalid may stay so
		}
	}
	if k.validationWarn {
		return nil // a server logs the failure and writes the document
	}
	return &cmdError{Code: codeDocumentValidationFailure, Msg: "Document failed validation",
		Extra: bson.D{{Key: "errInfo", Value: bson.D{{Key: "failingDocumentId", Value: docID(doc)}, {Key: "details", Value: details}}}}}
}

// bypassValidation reports the command's bypassDocumentValidation.
func (w *writeCtx) bypassValidation() bool {
	v, ok := w.c.Arg("bypassDocumentValidation")
	return ok && truthy(v)
}

// jsonSchema is a compiled $jsonSchema: MongoDB's draft-4 subset with bsonType.
type jsonSchema struct {
	spec       bson.D
	bsonTypes  []string
	jsonTypes  []string
	required   []string
	properties []schemaProp
	additional *bool       // additionalProperties: false/true
	addSchema  *jsonSchema // additionalProperties as a schema
	min, max   *float64
	exMin      bool
	exMax      bool
	minLen     *int
	maxLen     *int
	pattern    *regexp.Regexp
	enum       bson.A
	items      *jsonSchema
	minItems   *int
	maxItems   *int
	allOf      []*jsonSchema
	anyOf      []*jsonSchema
	oneOf      []*jsonSchema
	not        *jsonSchema
}

type schemaProp struct {
	name   string
	schema *jsonSchema
}

var schemaBSONTypes = map[string]bool{
	"double": true, "string": true, "object": true, "array": true, "binData": true, "undefined": true,
	"objectId": true, "bool": true, "date": true, "null": true, "regex": true, "dbPointer": true,
	"javascript": true, "symbol": true, "javascriptWithScope": true, "int": true, "timestamp": true,
	"long": true, "decimal": true, "minKey": true, "maxKey": true, "number": true,
}

func schemaErr(format string, args ...any) *cmdError {
	return errorf(codeFailedToParse, format, args...)
}

func compileSchema(v any) (*jsonSchema, *cmdError) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "$jsonSchema must be an object")
	}
	s := &jsonSchema{spec: d}
	num := func(kw string, x any) (*float64, *cmdError) {
		f, ok := toFloat(x)
		if !ok {
			return nil, schemaErr("$jsonSchema keyword '%s' must be a number", kw)
		}
		return &f, nil
	}
	nonNeg := func(kw string, x any) (*int, *cmdError) {
		n, ok := asInt64(x)
		if !ok || n < 0 {
			return nil, schemaErr("$jsonSchema keyword '%s' must be a non-negative integer", kw)
		}
		i := int(n)
		return &i, nil
	}
	schemas := func(kw string, x any) ([]*jsonSchema, *cmdError) {
		arr, ok := x.(bson.A)
		if !ok || len(arr) == 0 {
			return nil, schemaErr("$jsonSchema keyword '%s' must be a non-empty array", kw)
		}
		out := make([]*jsonSchema, len(arr))
		for i, e := range arr {
			sub, err := compileSchema(e)
			if err != nil {
				return nil, err
			}
			out[i] = sub
		}
		return out, nil
	}
	var err *cmdError
	for _, f := range d {
		switch f.Key {
		case "bsonType", "type":
			var names []string
			switch t := f.Value.(type) {
			case string:
				names = []string{t}
			case bson.A:
				for _, e := range t {
					n, _ := e.(string)
					names = append(names, n)
				}
			default:
				return nil, schemaErr("$jsonSchema keyword '%s' must be a string or an array of strings", f.Key)
			}
			for _, n := range names {
				if f.Key == "bsonType" && !schemaBSONTypes[n] {
					return nil, errorf(codeBadValue, "Unknown type name alias: %s", n)
				}
				if f.Key == "type" && !slices.Contains([]string{"object", "array", "number", "boolean", "string", "null"}, n) {
					return nil, errorf(codeBadValue, "Unknown type name alias: %s", n)
				}
			}
			if f.Key == "bsonType" {
				s.bsonTypes = names
			} else {
				s.jsonTypes = names
			}
		case "required":
			arr, ok := f.Value.(bson.A)
			if !ok || len(arr) == 0 {
				return nil, schemaErr("$jsonSchema keyword 'required' must be a non-empty array of strings")
			}
			for _, e := range arr {
				n, ok := e.(string)
				if !ok {
					return nil, schemaErr("$jsonSchema keyword 'required' must be a non-empty array of strings")
				}
				s.required = append(s.required, n)
			}
		case "properties":
			pd, ok := f.Value.(bson.D)
			if !ok {
				return nil, schemaErr("$jsonSchema keyword 'properties' must be an object")
			}
			for _, p := range pd {
				sub, err := compileSchema(p.Value)
				if err != nil {
					return nil, err
				}
				s.properties = append(s.properties, schemaProp{name: p.Key, schema: sub})
			}
		case "additionalProperties":
			switch a := f.Value.(type) {
			case bool:
				s.additional = &a
			default:
				if s.addSchema, err = compileSchema(a); err != nil {
					return nil, err
				}
			}
		case "minimum", "maximum":
			p, err := num(f.Key, f.Value)
			if err != nil {
				return nil, err
			}
			if f.Key == "minimum" {
				s.min = p
			} else {
				s.max = p
			}
		case "exclusiveMinimum", "exclusiveMaximum":
			b, ok := f.Value.(bool)
			if !ok {
				return nil, schemaErr("$jsonSchema keyword '%s' must be a boolean", f.Key)
			}
			if f.Key == "exclusiveMinimum" {
				s.exMin = b
			} else {
				s.exMax = b
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			p, err := nonNeg(f.Key, f.Value)
			if err != nil {
				return nil, err
			}
			switch f.Key {
			case "minLength":
				s.minLen = p
			case "maxLength":
				s.maxLen = p
			case "minItems":
				s.minItems = p
			default:
				s.maxItems = p
			}
		case "pattern":
			p, ok := f.Value.(string)
			if !ok {
				return nil, schemaErr("$jsonSchema keyword 'pattern' must be a string")
			}
			re, rerr := regexp.Compile(p)
			if rerr != nil {
				return nil, errorf(51091, "Regular expression is invalid: %v", rerr)
			}
			s.pattern = re
		case "enum":
			arr, ok := f.Value.(bson.A)
			if !ok || len(arr) == 0 {
				return nil, schemaErr("$jsonSchema keyword 'enum' must be a non-empty array")
			}
			s.enum = arr
		case "items":
			if _, isArr := f.Value.(bson.A); isArr {
				return nil, unsupported("$jsonSchema 'items' as an array of schemas")
			}
			if s.items, err = compileSchema(f.Value); err != nil {
				return nil, err
			}
		case "allOf", "anyOf", "oneOf":
			list, err := schemas(f.Key, f.Value)
			if err != nil {
				return nil, err
			}
			switch f.Key {
			case "allOf":
				s.allOf = list
			case "anyOf":
				s.anyOf = list
			default:
				s.oneOf = list
			}
		case "not":
			if s.not, err = compileSchema(f.Value); err != nil {
				return nil, err
			}
		case "title", "description":
		default:
			return nil, unsupported("the $jsonSchema keyword '%s'", f.Key)
		}
	}
	return s, nil
}

// failures returns the rules of s that v (present) does not satisfy, as a server's
// schemaRulesNotSatisfied entries; nil when v satisfies s.
func (s *jsonSchema) failures(v any) bson.A {
	var out bson.A
	rule := func(kw string, extra ...bson.E) {
		specVal, _ := lookupD(s.spec, kw)
		d := bson.D{{Key: "operatorName", Value: kw}, {Key: "specifiedAs", Value: bson.D{{Key: kw, Value: specVal}}}}
		out = append(out, append(d, extra...))
	}
	if len(s.bsonTypes) > 0 && !matchesBSONType(v, s.bsonTypes) {
		rule("bsonType", bson.E{Key: "reason", Value: "type did not match"}, bson.E{Key: "consideredValue", Value: v},
			bson.E{Key: "consideredType", Value: typeName(v)})
	}
	if len(s.jsonTypes) > 0 && !matchesJSONType(v, s.jsonTypes) {
		rule("type", bson.E{Key: "reason", Value: "type did not match"}, bson.E{Key: "consideredValue", Value: v},
			bson.E{Key: "consideredType", Value: typeName(v)})
	}
	if doc, ok := v.(bson.D); ok {
		var missing bson.A
		for _, r := range s.required {
			if _, ok := lookupD(doc, r); !ok {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			rule("required", bson.E{Key: "missingProperties", Value: missing})
		}
		var props bson.A
		for _, p := range s.properties {
			if pv, ok := lookupD(doc, p.name); ok {
				if sub := p.schema.failures(pv); len(sub) > 0 {
					props = append(props, bson.D{{Key: "propertyName", Value: p.name}, {Key: "details", Value: sub}})
				}
			}
		}
		if len(props) > 0 {
			rule("properties", bson.E{Key: "propertiesNotSatisfied", Value: props})
		}
		if s.additional != nil && !*s.additional || s.addSchema != nil {
			var extra bson.A
			for _, f := range doc {
				known := false
				for _, p := range s.properties {
					if p.name == f.Key {
						known = true
						break
					}
				}
				if known {
					continue
				}
				if s.addSchema == nil || len(s.addSchema.failures(f.Value)) > 0 {
					extra = append(extra, f.Key)
				}
			}
			if len(extra) > 0 {
				rule("additionalProperties", bson.E{Key: "additionalProperties", Value: extra})
			}
		}
	}
	if f, ok := toFloat(v); ok && query.TypeOrder(v) == query.TypeOrder(int32(0)) {
		if s.min != nil && (f < *s.min || s.exMin && f == *s.min) {
			rule("minimum", bson.E{Key: "consideredValue", Value: v})
		}
		if s.max != nil && (f > *s.max || s.exMax && f == *s.max) {
			rule("maximum", bson.E{Key: "consideredValue", Value: v})
		}
		if math.IsNaN(f) && (s.min != nil || s.max != nil) {
			rule("minimum", bson.E{Key: "consideredValue", Value: v})
		}
	}
	if str, ok := v.(string); ok {
		n := utf8.RuneCountInString(str)
		if s.minLen != nil && n < *s.minLen {
			rule("minLength", bson.E{Key: "consideredValue", Value: v})
		}
		if s.maxLen != nil && n > *s.maxLen {
			rule("maxLength", bson.E{Key: "consideredValue", Value: v})
		}
		if s.pattern != nil && !s.pattern.MatchString(str) {
			rule("pattern", bson.E{Key: "consideredValue", Value: v})
		}
	}
	if len(s.enum) > 0 {
		found := false
		for _, e := range s.enum {
			if query.Compare(e, v) == 0 && query.TypeOrder(e) == query.TypeOrder(v) {
				found = true
				break
			}
		}
		if !found {
			rule("enum", bson.E{Key: "consideredValue", Value: v})
		}
	}
	if arr, ok := v.(bson.A); ok {
		if s.minItems != nil && len(arr) < *s.minItems {
			rule("minItems", bson.E{Key: "consideredValue", Value: v})
		}
		if s.maxItems != nil && len(arr) > *s.maxItems {
			rule("maxItems", bson.E{Key: "consideredValue", Value: v})
		}
		if s.items != nil {
			var bad bson.A
			for i, e := range arr {
				if sub := s.items.failures(e); len(sub) > 0 {
					bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: sub}})
				}
			}
			if len(bad) > 0 {
				rule("items", bson.E{Key: "details", Value: bad})
			}
		}
	}
	for _, sub := range s.allOf {
		if len(sub.failures(v)) > 0 {
			rule("allOf")
			break
		}
	}
	if len(s.anyOf) > 0 {
		ok := false
		for _, sub := range s.anyOf {
			if len(sub.failures(v)) == 0 {
				ok = true
				break
			}
		}
		if !ok {
			rule("anyOf")
		}
	}
	if len(s.oneOf) > 0 {
		n := 0
		for _, sub := range s.oneOf {
			if len(sub.failures(v)) == 0 {
				n++
			}
		}
		if n != 1 {
			rule("oneOf", bson.E{Key: "reason", Value: fmt.Sprintf("%d schemas matched", n)})
		}
	}
	if s.not != nil && len(s.not.failures(v)) == 0 {
		rule("not")
	}
	return out
}

func matchesBSONType(v any, names []string) bool {
	t := typeName(v)
	for _, n := range names {
		if n == t || n == "number" && (t == "int" || t == "long" || t == "double" || t == "decimal") {
			return true
		}
	}
	return false
}

func matchesJSONType(v any, names []string) bool {
	t := typeName(v)
	for _, n := range names {
		switch n {
		case "object", "array", "string", "null":
			if n == t {
				return true
			}
		case "boolean":
			if t == "bool" {
				return true
			}
		case "number":
			if t == "int" || t == "long" || t == "double" || t == "decimal" {
				return true
			}
		}
	}
	return false
}
