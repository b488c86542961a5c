package checkpointer

import (
	"fmt"

	"github.com/watchtree/watchtree/internal/treekit"
)

// historyLostError is the terminal failure of history lost under Fail: it matches
// treekit.ErrHistoryLost (watchtree.ErrHistoryLost). A fenced write escalates a failure wrapping
// the store's error, which matches store.ErrFenced (watchtree.ErrFenced).
func historyLostError(stream string, code int32, message string) error {
	return fmt.Errorf("%w (stream %q): server error %d: %s", treekit.ErrHistoryLost, stream, code, message)
}

// fencedError is the terminal failure of a fenced write; err matches store.ErrFenced.
func fencedError(stream string, err error) error {
	return fmt.Errorf("checkpointer: stream %q: checkpoint write refused: %w", stream, err)
}
