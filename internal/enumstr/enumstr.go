// Package enumstr renders the integer enums of the module's packages from a table of names, so
// that each String method is one line over its table instead of a switch of its own, and every
// value outside the table reads alike: "<Type>(<n>)".
package enumstr

import "strconv"

// Integer is the underlying type of an integer enum.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Of returns names[v], or typ+"(<v>)" when v is not an index of names or its name is empty (a
// table may leave the values that name nothing empty, a zero value that means "unset", say).
func Of[T Integer](names []string, v T, typ string) string {
	if v >= 0 && uint64(v) < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	if v < 0 {
		return typ + "(" + strconv.FormatInt(int64(v), 10) + ")"
	}
	return typ + "(" + strconv.FormatUint(uint64(v), 10) + ")"
}
