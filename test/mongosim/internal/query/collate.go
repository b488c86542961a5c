package query

import "go.mongodb.org/mongo-driver/v2/bson"

// Collate maps a string to its comparison key under a collation: two strings compare as
// their keys do byte by byte. nil means the simple (binary) collation.
type Collate func(s string) string

// collator returns env's collation, nil for the simple one.
func (env *Env) collator() Collate {
	if env == nil {
		return nil
	}
	return env.Collate
}

// CollateValue returns v with every string (also inside documents and arrays) replaced by its
// key under col, so that Compare and HashKey of the results order and identify values as the
// collation does. Values holding no string are returned as they are; col nil returns v.
func CollateValue(v any, col Collate) any {
	if col == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return col(x)
	case bson.Symbol:
		return col(string(x))
	case bson.D:
		out := make(bson.D, len(x))
		for i, e := range x {
			out[i] = bson.E{Key: e.Key, Value: CollateValue(e.Value, col)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = CollateValue(e, col)
		}
		return out
	}
	return v
}
