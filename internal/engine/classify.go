package engine

import (
	"context"
	"errors"
	"net"
	"slices"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/store"
)

// failureClass says what a stream's failure means for its RestartPolicy.
type failureClass int

const (
	// transient: the stream goes to backoff and the RestartPolicy restarts it (or gives up once
	// MaxAttempts is used).
	transient failureClass = iota
	// terminal: no restart can fix it; the stream crashes at once and stays down until an
	// operator starts it.
	terminal
)

func (c failureClass) String() string {
	if c == terminal {
		return "terminal"
	}
	return "transient"
}

// terminalSentinels are the terminal failures raised inside a stream tree (watchtree.ErrHistoryLost,
// ErrInvalidated, ErrFenced and ErrSnapshotMixedIDs are these values).
var terminalSentinels = []error{streamtree.ErrHistoryLost, streamtree.ErrInvalidated, store.ErrFenced, streamtree.ErrMixedIDTypes}

// transientLabels are the driver's and the server's labels of an error worth retrying.
var transientLabels = []string{
	"NetworkError", "NetworkTimeoutError", "RetryableWriteError", "ResumableChangeStreamError",
	"TransientTransactionError", "ExceededTimeLimitError", "SystemOverloadedError", "RetryableError",
}

// transientCodes are server error codes a later attempt can succeed after: the network, a
// primary that stepped down or a node shutting down, timeouts, a cursor the server forgot, a
// shard's stale routing. The history-lost codes are here too: after events were read (before
// that they go to the checkpointer), a restart resumes from the checkpoint and OnHistoryLost
// decides.
var transientCodes = map[int]string{
	6:     "HostUnreachable",
	7:     "HostNotFound",
	43:    "CursorNotFound",
	50:    "MaxTimeMSExpired",
	63:    "StaleShardVersion",
	89:    "NetworkTimeout",
	91:    "ShutdownInProgress",
	133:   "FailedToSatisfyReadPreference",
	134:   "ReadConcernMajorityNotAvailableYet",
	136:   "CappedPositionLost",
	150:   "StaleEpoch",
	189:   "PrimarySteppedDown",
	234:   "RetryChangeStream",
	237:   "CursorKilled",
	262:   "ExceededTimeLimit",
	280:   "ChangeStreamFatalError",
	286:   "ChangeStreamHistoryLost",
	9001:  "SocketException",
	10058: "LegacyNotPrimary",
	10107: "NotWritablePrimary",
	11600: "InterruptedAtShutdown",
	11602: "InterruptedDueToReplStateChange",
	13388: "StaleConfig",
	13435: "NotPrimaryNoSecondaryOk",
	13436: "NotPrimaryOrSecondary",
}

// terminalCodes are server error codes no restart can fix: the request itself is refused (the
// Pipeline, an option, the namespace) or the client is not allowed.
var terminalCodes = map[int]string{
	2:     "BadValue", // e.g. an unknown query operator in $match: "unknown operator: $eqq"
	9:     "FailedToParse",
	13:    "Unauthorized",
	14:    "TypeMismatch",
	18:    "AuthenticationFailed",
	20:    "IllegalOperation", // e.g. "$group is not permitted in a $changeStream pipeline"
	59:    "CommandNotFound",
	72:    "InvalidOptions",
	73:    "InvalidNamespace",
	115:   "CommandNotSupported",
	166:   "CommandNotSupportedOnView",
	168:   "InvalidPipelineOperator", // an unknown aggregation expression: "Unrecognized expression '$foo'"
	323:   "APIStrictError",
	40323: "Location40323", // "A pipeline stage specification object must contain exactly one field."
	40324: "Location40324", // "Unrecognized pipeline stage name: '$matchh'"
	40415: "Location40415", // an unknown field in a command or a stage
	40573: "Location40573", // "The $changeStream stage is only supported on replica sets"
	40602: "Location40602", // "$changeStream is only valid as the first stage in a pipeline"
}

// classifyFailure is the supervisors' Classifier: it classifies the failure (classifyError) and
// reports it as it is, so that the cause reads as the error that failed (the server's own words
// for a server error).
//
// A failure that waited for a connection from the client's own pool is reported as such, with
// the remedy (explainPool): the driver's text alone reads like a slow server.
func classifyFailure(reason any) (bool, error) {
	cause := streamtree.AsError(reason)
	return classifyError(cause) == terminal, explainPool(cause)
}

// classifyError classifies a stream's failure, in this order:
//
//  1. terminal: the terminal sentinels (history lost under Fail, invalidated under
//     InvalidateStop, fenced, mixed _id types), and a Pipeline that removes or changes the event's _id;
//  2. transient: a network error (mongo.IsNetworkError, a net.Error), a transient label, a
//     timeout (mongo.IsTimeout: a context deadline, MaxTimeMSExpired, a network timeout), a
//     server selection error, or one of transientCodes;
//  3. terminal: one of terminalCodes;
//  4. transient: anything else, such as a failed store write or an error of the user's; the
//     RestartPolicy bounds it.
//
// Transient signals come before terminal codes because the driver labels an error it knows
// to be worth retrying, whatever its code.
func classifyError(err error) failureClass {
	for _, s := range terminalSentinels {
		if errors.Is(err, s) {
			return terminal
		}
	}
	if errdetail.PipelineModifiedID(err) {
		return terminal
	}
	if isTransient(err) {
		return transient
	}
	var se mongo.ServerError
	if errors.As(err, &se) && slices.ContainsFunc(se.ErrorCodes(), func(c int) bool { _, ok := terminalCodes[c]; return ok }) {
		return terminal
	}
	return transient
}

// isTransient reports whether err carries a signal that a later attempt can succeed.
func isTransient(err error) bool {
	var ne net.Error
	var sse topology.ServerSelectionError
	if mongo.IsNetworkError(err) || errors.As(err, &ne) || mongo.IsTimeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &sse) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	if slices.ContainsFunc(transientLabels, se.HasErrorLabel) {
		return true
	}
	return slices.ContainsFunc(se.ErrorCodes(), func(c int) bool { _, ok := transientCodes[c]; return ok })
}
