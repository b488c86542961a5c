package policy

import "github.com/watchtree/watchtree/internal/enumstr"

// Invalidate (watchtree.InvalidatePolicy, Stream.OnInvalidate) says what a collection or database
// stream does after an invalidate event (the watched collection was dropped or renamed, or its
// database dropped); the stream actor applies it (its Config.InvalidateRestart is true for
// InvalidateRestart). The zero value is InvalidateStop.
type Invalidate int

const (
	// InvalidateStop (the default) stops the stream terminally with ErrInvalidated, reported as
	// Stopped{Crashed}. It stays down until an operator starts it (which resumes after the
	// invalidate).
	InvalidateStop Invalidate = iota
	// InvalidateRestart opens a new change stream right after the invalidate (startAfter), so
	// the stream follows a re-created collection of the same name.
	InvalidateRestart
)

// String returns "InvalidateStop" or "InvalidateRestart", the names the Observer's Invalidated
// event carries.
func (p Invalidate) String() string { return enumstr.Of(invalidateNames, p, "InvalidatePolicy") }

var invalidateNames = []string{InvalidateStop: "InvalidateStop", InvalidateRestart: "InvalidateRestart"}
