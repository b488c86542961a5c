package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/store"
)

// serverErr is a server error as the driver reports a refused command.
func serverErr(code int32, name, msg string, labels ...string) mongo.CommandError {
	return mongo.CommandError{Code: code, Name: name, Message: msg, Labels: labels}
}

// actorErr has the shape of the stream actor's failure (its own error type): it unwraps to its
// sentinel and to the cause. The classifier knows neither, only what they wrap.
type actorErr struct{ sentinel, cause error }

func (e *actorErr) Error() string {
	if e.cause == nil {
		return e.sentinel.Error()
	}
	return e.sentinel.Error() + ": " + e.cause.Error()
}

func (e *actorErr) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// The stream actor's sentinels the classifier does not match (it reads their causes).
var (
	errCursor       = errors.New("stream: change stream cursor failed")
	errStartFailed  = errors.New("stream: start position not resolved")
	errCursorClosed = errors.New("stream: the server closed the change stream cursor")
)

// TestClassifyError: failures against their class, through the wrappings they arrive in (the
// stream actor's error, a sibling's failure, Fail, a panic, a message's ErrorDetail) and the
// driver's error types (CommandError, WriteException, labels, network and timeout errors).
func TestClassifyError(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("actor: %w", err) }
	cursor := func(cause error) error { return &actorErr{sentinel: errCursor, cause: cause} }
	unknownStage := serverErr(40324, "Location40324", "Unrecognized pipeline stage name: '$matchh'")
	// The start failure of the finding: the capture refused by the server, carried to the stream
	// actor in a StartFrom FAIL and failed with by Fail.
	startFailed := &streamtree.Failure{Incarnation: 2, Err: &actorErr{sentinel: errStartFailed,
		cause: fmt.Errorf("capture the current position: %w", errdetail.Err(errdetail.Of(unknownStage)))}}
	for _, tc := range []struct {
		name string
		err  error
		want failureClass
	}{
		// Terminal sentinels, however they are wrapped.
		{"history lost", wrapped(streamtree.ErrHistoryLost), terminal},
		{"history lost via a sibling", fmt.Errorf("%w: %w", streamtree.ErrSiblingFailed, streamtree.ErrHistoryLost), terminal},
		{"fenced store write", fmt.Errorf("memstore: save: %w", store.ErrFenced), terminal},
		{"invalidated", &actorErr{sentinel: streamtree.ErrInvalidated}, terminal},
		{"invalidated in a Failure", &streamtree.Failure{Err: &actorErr{sentinel: streamtree.ErrInvalidated}}, terminal},
		{"invalidated in a panic", &streamtree.PanicError{Value: wrapped(streamtree.ErrInvalidated)}, terminal},
		{"pipeline removed _id", cursor(serverErr(280, "ChangeStreamFatalError",
			"Encountered an event whose _id field, which contains the resume token, was modified by the pipeline.")), terminal},

		// Server errors no restart can fix.
		{"unknown stage at open", cursor(unknownStage), terminal},
		{"unknown stage at capture (the finding)", startFailed, terminal},
		{"unknown $match operator", cursor(serverErr(2, "BadValue", "unknown operator: $eqq")), terminal},
		{"unknown expression", cursor(serverErr(168, "InvalidPipelineOperator", "Unrecognized expression '$foo'")), terminal},
		{"not a replica set", cursor(serverErr(40573, "Location40573", "The $changeStream stage is only supported on replica sets")), terminal},
		{"unauthorized", serverErr(13, "Unauthorized", "not authorized on app to execute command"), terminal},
		{"authentication failed", wrapped(serverErr(18, "AuthenticationFailed", "Authentication failed.")), terminal},
		{"write exception with a terminal code", fmt.Errorf("save: %w", mongo.WriteException{
			WriteErrors: mongo.WriteErrors{{Code: 13, Message: "not authorized"}}}), terminal},

		// Transient: network, labels, timeouts, server selection, the not-primary family.
		{"network error", cursor(mongo.CommandError{Message: "connection closed", Labels: []string{"NetworkError"}}), transient},
		{"net.Error", wrapped(&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}), transient},
		{"context deadline", wrapped(context.DeadlineExceeded), transient},
		{"server selection", wrapped(topology.ServerSelectionError{Wrapped: errors.New("no primary")}), transient},
		{"MaxTimeMSExpired", cursor(serverErr(50, "MaxTimeMSExpired", "operation exceeded time limit")), transient},
		{"resumable label", cursor(serverErr(6, "HostUnreachable", "", "ResumableChangeStreamError")), transient},
		{"retryable write label", fmt.Errorf("save: %w", mongo.WriteException{
			WriteConcernError: &mongo.WriteConcernError{Code: 64, Name: "WriteConcernFailed"}, Labels: []string{"RetryableWriteError"}}), transient},
		{"write concern not primary", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 10107, Name: "NotWritablePrimary"}}, transient},
		{"a labelled error wins over its code", serverErr(2, "BadValue", "x", "TransientTransactionError"), transient},
		{"history lost after events", cursor(serverErr(286, "ChangeStreamHistoryLost", "resume point gone")), transient},
		{"rebuilt from a message", &streamtree.Failure{Err: cursor(errdetail.Err(errdetail.Of(serverErr(91, "ShutdownInProgress", "shutting down"))))}, transient},

		// Unknown: transient, the RestartPolicy bounds it.
		{"unknown server code", cursor(serverErr(8, "UnknownError", "?")), transient},
		{"cursor closed by the server", cursor(errCursorClosed), transient},
		{"stream actor stopped", streamtree.ErrChildStopped, transient},
		{"store fault", wrapped(errors.New("disk full")), transient},
		{"a real panic", &streamtree.PanicError{Value: "index out of range"}, transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyError(tc.err); got != tc.want {
				t.Fatalf("classifyError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	for code, name := range terminalCodes {
		if transientCodes[code] != "" {
			t.Errorf("code %d is both terminal and transient", code)
		}
		if got := classifyError(cursor(serverErr(int32(code), name, "refused"))); got != terminal {
			t.Errorf("code %d %s: %v, want terminal", code, name, got)
		}
	}
	for code, name := range transientCodes {
		if got := classifyError(cursor(serverErr(int32(code), name, "try again"))); got != transient {
			t.Errorf("code %d %s: %v, want transient", code, name, got)
		}
	}
}

// TestClassifyFailureReportsTheCauseAsItIs: the supervisor's Classifier keeps the failure as
// the cause, so the stream's cause reads as the server worded it, matches the root sentinels
// with errors.Is, and is no panic.
func TestClassifyFailureReportsTheCauseAsItIs(t *testing.T) {
	unknownStage := serverErr(40324, "Location40324", "Unrecognized pipeline stage name: '$matchh'")
	reason := &streamtree.Failure{Incarnation: 1, Err: &actorErr{sentinel: errCursor, cause: unknownStage}}
	isTerminal, cause := classifyFailure(reason)
	if !isTerminal || cause != error(reason) {
		t.Fatalf("classifyFailure = %v, %v; want terminal with the reason itself", isTerminal, cause)
	}
	if msg := cause.Error(); !strings.Contains(msg, "Unrecognized pipeline stage name: '$matchh'") || strings.Contains(msg, "panic") {
		t.Fatalf("cause %q, want the server's message and no panic", msg)
	}
	isTerminal, cause = classifyFailure(&streamtree.Failure{Err: &actorErr{sentinel: streamtree.ErrInvalidated}})
	if !isTerminal || !errors.Is(cause, streamtree.ErrInvalidated) {
		t.Fatalf("invalidate-stop: %v, %v; want terminal matching ErrInvalidated", isTerminal, cause)
	}
	if isTerminal, cause := classifyFailure("boom"); isTerminal || cause == nil || cause.Error() != "boom" {
		t.Fatalf("a panic value: %v, %v; want transient with its text", isTerminal, cause)
	}
}
