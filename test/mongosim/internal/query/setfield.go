package query

import (
	"math/rand/v2"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	exprOps["$setField"] = opSetField
	exprOps["$unsetField"] = opUnsetField
	exprOps["$rand"] = opRand
	delete(knownUnsupportedExprs, "$setField")
	delete(knownUnsupportedExprs, "$unsetField")
	delete(knownUnsupportedExprs, "$rand")
}

// opSetField is $setField {field, input, value}: input with the field (a constant string, any
// name, $-prefixed or dotted too) set to value, or removed when value is $$REMOVE. A null or
// missing input gives null.
func opSetField(ev *evaluator, operand any) (any, error) {
	return setField(ev, "$setField", operand, true)
}

// opUnsetField is $unsetField {field, input}: $setField with value $$REMOVE.
func opUnsetField(ev *evaluator, operand any) (any, error) {
	return setField(ev, "$unsetField", operand, false)
}

func setField(ev *evaluator, op string, operand any, hasValue bool) (any, error) {
	d, ok := operand.(bson.D)
	if !ok {
		return nil, errf(4161100, "%s only supports an object as its argument", op)
	}
	var fieldE, inputE, valueE any
	var gotField, gotInput, gotValue bool
	for _, e := range d {
		switch {
		case e.Key == "field":
			fieldE, gotField = e.Value, true
		case e.Key == "input":
			inputE, gotInput = e.Value, true
		case e.Key == "value" && hasValue:
			valueE, gotValue = e.Value, true
		default:
			return nil, errf(4161101, "%s found an unknown argument: %s", op, e.Key)
		}
	}
	switch {
	case !gotField:
		return nil, errf(4161102, "%s requires 'field' to be specified", op)
	case !gotInput:
		return nil, errf(4161109, "%s requires 'input' to be specified", op)
	case hasValue && !gotValue:
		return nil, errf(4161103, "%s requires 'value' to be specified", op)
	}
	// The field name is a constant: a string, or {$literal: string}.
	if lit, ok := fieldE.(bson.D); ok && len(lit) == 1 && lit[0].Key == "$literal" {
		fieldE = lit[0].Value
	}
	name, ok := fieldE.(string)
	if !ok {
		return nil, errf(4161106, "%s requires 'field' to evaluate to a constant, but got a non-constant argument", op)
	}
	if strings.HasPrefix(name, "$") && !isLiteralField(d) {
		return nil, errf(4161108, "A field path reference which is not allowed in this context. Did you mean {$literal: '%s'}?", name)
	}
	in, err := ev.eval(inputE)
	if err != nil {
		return nil, err
	}
	if isNullish(in) {
		return nil, nil
	}
	doc, ok := in.(bson.D)
	if !ok {
		return nil, errf(4161105, "%s requires 'input' to evaluate to type Object", op)
	}
	var val any = missingV
	if hasValue {
		if val, err = ev.eval(valueE); err != nil {
			return nil, err
		}
	}
	out := make(bson.D, 0, len(doc)+1)
	found := false
	for _, e := range doc {
		if e.Key != name {
			out = append(out, e)
			continue
		}
		found = true
		if !isMissing(val) {
			out = append(out, bson.E{Key: name, Value: val})
		}
	}
	if !found && !isMissing(val) {
		out = append(out, bson.E{Key: name, Value: val})
	}
	return out, nil
}

// isLiteralField reports whether the field argument was given as {$literal: ...}.
func isLiteralField(d bson.D) bool {
	for _, e := range d {
		if e.Key == "field" {
			lit, ok := e.Value.(bson.D)
			return ok && len(lit) == 1 && lit[0].Key == "$literal"
		}
	}
	return false
}

// opRand is $rand {}: a double in [0, 1).
func opRand(_ *evaluator, operand any) (any, error) {
	if d, ok := operand.(bson.D); !ok || len(d) != 0 {
		return nil, errf(3040500, "$rand does not currently accept arguments")
	}
	return rand.Float64(), nil
}
