package supervisor

import (
	"errors"

	"github.com/watchtree/watchtree/internal/treekit"
)

// Classifier decides what a failure means. reason is what protoactor reported: a
// *treekit.Failure when the actor called treekit.Fail, a *treekit.PanicError when it panicked
// under this package's middleware, the value passed to EscalateFailure otherwise. It returns
// whether the failure is terminal (give up at once, whatever the attempts left) and the cause to
// report, which should wrap reason when reason is an error (treekit.AsError). It runs on the
// supervisor's goroutine and must not block. treekit.TerminalOn makes one from a list of
// terminal sentinels.
type Classifier func(reason any) (terminal bool, cause error)

// panicOf returns the *treekit.PanicError in err's chain, or nil.
func panicOf(err error) *treekit.PanicError {
	var pe *treekit.PanicError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
