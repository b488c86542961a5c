package streamtree

import "errors"

// The sentinels the actors of a stream tree fail with, defined once here so that the engine's
// classifier and the root package, which re-exports the terminal ones under its own names, match
// the very values the actors raise (errors.Is).
var (
	// ErrHistoryLost is matched by the terminal failure the checkpointer escalates when the start
	// position is no longer in the oplog and OnHistoryLost is Fail (watchtree.ErrHistoryLost).
	ErrHistoryLost = errors.New("watchtree: change stream history lost")
	// ErrInvalidated: an invalidate event ended the change stream and the stream actor's
	// Config.InvalidateRestart is false. Terminal (watchtree.ErrInvalidated).
	ErrInvalidated = errors.New("watchtree: change stream invalidated")
	// ErrMixedIDTypes is the terminal error of a snapshot whose collection holds _id values of
	// different BSON types: a range query on _id compares values of one type only, so ranges
	// would skip documents (watchtree.ErrSnapshotMixedIDs).
	ErrMixedIDTypes = errors.New("watchtree: snapshot: mixed _id types")
	// ErrGaveUp is matched by the cause of a supervisor's transition to crashed, and of the
	// terminal observe.Stopped, when the RestartPolicy ran out of attempts; the cause also wraps
	// the latest death's (watchtree.ErrGaveUp).
	ErrGaveUp = errors.New("watchtree: restart attempts exhausted")
	// ErrChildStopped is the cause of a death when the stream actor stopped by itself (it was not
	// stopped by its supervisor). Classifiers treat it as transient.
	ErrChildStopped = errors.New("supervisor: stream actor stopped unexpectedly")
	// ErrSiblingFailed wraps the cause when a sibling of the stream actor (checkpointer,
	// dispatcher) failed: the sibling is restarted in place and the stream actor is restarted
	// through the restart policy, as for a death.
	ErrSiblingFailed = errors.New("supervisor: sibling failed")
)
