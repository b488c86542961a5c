package mongosim

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Server error codes the simulator returns, with the codeName a real server pairs with each.
const (
	codeInternalError                  = 1
	codeBadValue                       = 2
	codeHostUnreachable                = 6
	codeHostNotFound                   = 7
	codeFailedToParse                  = 9
	codeTypeMismatch                   = 14
	codeInvalidLength                  = 16
	codeIllegalOperation               = 20
	codeLockTimeout                    = 24
	codeNamespaceNotFound              = 26
	codeIndexNotFound                  = 27
	codePathNotViable                  = 28
	codeConflictingUpdateOperators     = 40
	codeCursorNotFound                 = 43
	codeNoMatchingDocument             = 47
	codeNamespaceExists                = 48
	codeMaxTimeMSExpired               = 50
	codeDollarPrefixedFieldName        = 52
	codeInvalidIdField                 = 53
	codeNotSingleValueField            = 54
	codeCommandNotFound                = 59
	codeImmutableField                 = 66
	codeInvalidOptions                 = 72
	codeInvalidNamespace               = 73
	codeIndexOptionsConflict           = 85
	codeIndexKeySpecsConflict          = 86
	codeNetworkTimeout                 = 89
	codeOperationFailed                = 96
	codeShutdownInProgress             = 91
	codeWriteConflict                  = 112
	codeConflictingOperationInProgress = 117
	codeInvalidPipelineOperator        = 168
	codePrimarySteppedDown             = 189
	codeNoSuchTransaction              = 251
	codeTransactionCommitted           = 256
	codeTransactionTooLarge            = 257
	codeInvalidResumeToken             = 260
	codeExceededTimeLimit              = 262
	codeTransactionTooOld              = 225
	codeCursorInUse                    = 292
	codeChangeStreamFatalError         = 280
	codeChangeStreamHistoryLost        = 286
	codeUnsupportedOpQueryCommand      = 352
	// codeUnsupported is the Location code of every "mongosim does not support …" error.
	codeUnsupported                     = 9_000_001
	codeSocketException                 = 9001
	codeNotWritablePrimary              = 10107
	codeDuplicateKey                    = 11000
	codeInterruptedAtShutdown           = 11600
	codeInterrupted                     = 11601
	codeInterruptedDueToReplStateChange = 11602
	codeNotPrimaryNoSecondaryOk         = 13435
	codeNotPrimaryOrSecondary           = 13436
)

var codeNames = map[int32]string{
	1: "InternalError", 2: "BadValue", 4: "NoSuchKey", 6: "HostUnreachable", 7: "HostNotFound",
	8: "UnknownError", 9: "FailedToParse", 11: "UserNotFound", 13: "Unauthorized",
	14: "TypeMismatch", 16: "InvalidLength", 20: "IllegalOperation", 24: "LockTimeout",
	26: "NamespaceNotFound", 27: "IndexNotFound", 28: "PathNotViable", 40: "ConflictingUpdateOperators",
	43: "CursorNotFound", 47: "NoMatchingDocument", 48: "NamespaceExists", 50: "MaxTimeMSExpired",
	52: "DollarPrefixedFieldName", 53: "InvalidIdField", 54: "NotSingleValueField",
	59: "CommandNotFound", 63: "StaleShardVersion", 64: "WriteConcernFailed",
	66: "ImmutableField", 67: "CannotCreateIndex", 72: "InvalidOptions", 73: "InvalidNamespace",
	85: "IndexOptionsConflict", 86: "IndexKeySpecsConflict", 89: "NetworkTimeout",
	91: "ShutdownInProgress", 96: "OperationFailed", 112: "WriteConflict",
	117: "ConflictingOperationInProgress", 121: "DocumentValidationFailure",
	133: "FailedToSatisfyReadPreference", 134: "ReadConcernMajorityNotAvailableYet",
	136: "CappedPositionLost", 150: "StaleEpoch", 171: "CannotIndexParallelArrays",
	181: "AmbiguousIndexKeyPattern", 197: "InvalidIndexSpecificationOption",
	263: "OperationNotSupportedInTransaction", 10334: "BSONObjectTooLarge", 168: "InvalidPipelineOperator",
	189: "PrimarySteppedDown", 216: "ElectionInProgress", 225: "TransactionTooOld",
	234: "RetryChangeStream", 237: "CursorKilled", 251: "NoSuchTransaction",
	256: "TransactionCommitted", 257: "TransactionTooLarge", 260: "InvalidResumeToken",
	262: "ExceededTimeLimit", 267: "PreparedTransactionInProgress", 280: "ChangeStreamFatalError",
	286: "ChangeStreamHistoryLost", 292: "CursorInUse", 352: "UnsupportedOpQueryCommand",
	9001: "SocketException", 10058: "LegacyNotPrimary", 10107: "NotWritablePrimary",
	11000: "DuplicateKey", 11600: "InterruptedAtShutdown", 11601: "Interrupted",
	11602: "InterruptedDueToReplStateChange", 13388: "StaleConfig",
	13435: "NotPrimaryNoSecondaryOk", 13436: "NotPrimaryOrSecondary",
	79: "UnknownReplWriteConcern", 100: "UnsatisfiableWriteConcern", 239: "SnapshotTooOld",
	246: "SnapshotUnavailable", 322: "APIVersionError", 323: "APIStrictError", 31082: "SearchNotEnabled",
}

// codeName returns the server's name for code, or "Location<code>" for the numbered
// assertion codes that have no name.
func codeName(code int32) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", code)
}

// cmdError is a command failure, serialised as {ok:0, errmsg, code, codeName, errorLabels, ...}.
type cmdError struct {
	Code int32
	Msg  string
	// Labels, when non-nil, replace the labels the server would compute (a fail point's
	// errorLabels, possibly empty). When nil, the dispatcher computes them (§4.3 of the reference).
	Labels []string
	// Extra fields appended to the error reply (keyPattern/keyValue of a DuplicateKey).
	Extra bson.D
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("%s (%d): %s", codeName(e.Code), e.Code, e.Msg)
}

// errorf builds a command error with a formatted message.
func errorf(code int32, format string, args ...any) *cmdError {
	return &cmdError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// unsupported reports a feature the simulator does not implement, the way a real server
// reports an unknown option: a Location error whose message names the feature.
func unsupported(format string, args ...any) *cmdError {
	return &cmdError{Code: codeUnsupported, Msg: "mongosim does not support " + fmt.Sprintf(format, args...)}
}
