package checkpointer

import (
	"errors"
	"fmt"
)

// Sentinels of the terminal failures the checkpointer escalates to its supervisor. The escalated
// error matches one of them and Config.TerminalErr (when set) with errors.Is.
var (
	// ErrHistoryLost: the start position is no longer in the oplog and OnHistoryLost is Fail.
	ErrHistoryLost = errors.New("checkpointer: change stream history lost")
	// ErrFenced: a checkpoint write was refused because a newer epoch owns the stream. The
	// escalated error also wraps the store's error (store.ErrFenced).
	ErrFenced = errors.New("checkpointer: checkpoint write fenced by a newer epoch")
)

// terminalError is a terminal failure: it matches its sentinel, the configured TerminalErr and
// its cause.
type terminalError struct {
	sentinel error
	terminal error // Config.TerminalErr; may be nil
	cause    error // may be nil
	stream   string
	detail   string
}

func (e *terminalError) Error() string {
	s := fmt.Sprintf("%v (stream %q)", e.sentinel, e.stream)
	if e.detail != "" {
		s += ": " + e.detail
	}
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *terminalError) Unwrap() []error {
	errs := []error{e.sentinel}
	if e.terminal != nil {
		errs = append(errs, e.terminal)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}
