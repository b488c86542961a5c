package policy

import "fmt"

// Invalidate is watchtree.InvalidatePolicy in the form the stream actor takes (its values are
// the same); the root documents it.
type Invalidate int

// The values of watchtree.InvalidateStop and InvalidateRestart.
const (
	InvalidateStop Invalidate = iota
	InvalidateRestart
)

// String returns "InvalidateStop" or "InvalidateRestart".
func (p Invalidate) String() string {
	switch p {
	case InvalidateStop:
		return "InvalidateStop"
	case InvalidateRestart:
		return "InvalidateRestart"
	}
	return fmt.Sprintf("InvalidatePolicy(%d)", int(p))
}
