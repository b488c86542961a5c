package checkpointer

import (
	"fmt"

	"github.com/watchtree/watchtree/actors/streamtree"
)

// historyLostError is the terminal failure of history lost under Fail: it matches
// streamtree.ErrHistoryLost (watchtree.ErrHistoryLost). A fenced write escalates a failure wrapping
// the store's error, which matches store.ErrFenced (watchtree.ErrFenced).
func historyLostError(stream string, code int32, message string) error {
	if code == 0 {
		return fmt.Errorf("%w (stream %q): %s", streamtree.ErrHistoryLost, stream, message)
	}
	return fmt.Errorf("%w (stream %q): server error %d: %s", streamtree.ErrHistoryLost, stream, code, message)
}

// lossReason is a gap record's reason: the server's error code and message, or (code 0) the
// stream actor's own finding, such as a saved token that is not a resume token.
func lossReason(code int32, message string) string {
	if code == 0 {
		return message
	}
	return fmt.Sprintf("code %d: %s", code, message)
}

// fencedError is the terminal failure of a fenced write; err matches store.ErrFenced.
func fencedError(stream string, err error) error {
	return fmt.Errorf("checkpointer: stream %q: checkpoint write refused: %w", stream, err)
}
