package checkpointer

import (
	"errors"
	"fmt"
)

// ErrHistoryLost is matched (errors.Is) by the terminal failure the checkpointer escalates when
// the start position is no longer in the oplog and OnHistoryLost is Fail. The root package
// re-exports it as watchtree.ErrHistoryLost. A fenced write escalates a failure wrapping the
// store's error, which matches store.ErrFenced (watchtree.ErrFenced).
var ErrHistoryLost = errors.New("watchtree: change stream history lost")

// historyLostError is the terminal failure of history lost under Fail.
func historyLostError(stream string, code int32, message string) error {
	return fmt.Errorf("%w (stream %q): server error %d: %s", ErrHistoryLost, stream, code, message)
}

// fencedError is the terminal failure of a fenced write; err matches store.ErrFenced.
func fencedError(stream string, err error) error {
	return fmt.Errorf("checkpointer: stream %q: checkpoint write refused: %w", stream, err)
}
