package stream

import (
	"errors"
	"fmt"
)

// Sentinels of the failures the stream actor reports to its supervisor, with streamtree.ErrInvalidated
// (the terminal one): it fails with streamtree.Fail and an *actorError matching one of them, which
// reaches the supervisor as a *streamtree.Failure unwrapping to it. Panics are kept for bugs (a
// StartFrom that breaks the protocol, an actor with nobody to talk to).
var (
	// errCursor: the cursor died after the driver's own resume attempt (or opening it failed).
	// The failure also wraps the driver's error, so the supervisor's classifier decides: usually
	// transient (a restart after the RestartPolicy delay), terminal for a server error no
	// restart can fix (an unknown pipeline stage, an authorization error).
	errCursor = errors.New("stream: change stream cursor failed")
	// errStartFailed: the checkpointer answered a non-terminal StartFrom FAIL (the start position
	// could not be captured or persisted, a rebuild failed). The failure also wraps the FAIL's
	// cause, which the classifier reads as for errCursor: a capture the server refuses (the
	// Pipeline) is terminal, a network error transient.
	errStartFailed = errors.New("stream: start position not resolved")
)

// actorError is the failure the stream actor reports. It matches its sentinel
// (streamtree.ErrInvalidated, errCursor, errStartFailed) and the cause.
type actorError struct {
	Stream      string // the stream's name
	Incarnation uint64 // the incarnation of the stream actor that failed, from 1
	// Sentinel is streamtree.ErrInvalidated, errCursor or errStartFailed.
	Sentinel error
	// Cause is the driver's error, when there is one.
	Cause error
	// Detail is a one-line explanation.
	Detail string
}

// Error returns "<sentinel> (stream "<name>", incarnation <n>): <detail>: <cause>".
func (e *actorError) Error() string {
	s := fmt.Sprintf("%v (stream %q, incarnation %d)", e.Sentinel, e.Stream, e.Incarnation)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel and the cause.
func (e *actorError) Unwrap() []error {
	errs := []error{e.Sentinel}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}
