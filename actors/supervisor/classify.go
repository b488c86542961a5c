package supervisor

import (
	"errors"

	"github.com/watchtree/watchtree/actors/streamtree"
)

// Classifier decides what a failure means. reason is what protoactor reported: a
// *streamtree.Failure when the actor called streamtree.Fail, a *streamtree.PanicError when it panicked
// under this package's middleware, the value passed to EscalateFailure otherwise. It returns
// whether the failure is terminal (give up at once, whatever the attempts left) and the cause to
// report, which should wrap reason when reason is an error (streamtree.AsError). It runs on the
// supervisor's goroutine and must not block. streamtree.TerminalOn makes one from a list of
// terminal sentinels.
type Classifier func(reason any) (terminal bool, cause error)

// panicOf returns the *streamtree.PanicError in err's chain, or nil.
func panicOf(err error) *streamtree.PanicError {
	var pe *streamtree.PanicError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
