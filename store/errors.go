package store

import "errors"

// Sentinel errors. Implementations wrap them with context (the stream, the ID, the epochs), so
// match them with errors.Is, never with ==.
var (
	// ErrFenced is returned by a checkpoint Save whose Epoch is lower than the Epoch already
	// stored for the stream: a newer owner (a later leadership epoch) holds the stream, and the
	// writer must stop processing at once. The stored record is left unchanged. It is never
	// transient: retrying the same write fails the same way. The root package re-exports it as
	// watchtree.ErrFenced.
	ErrFenced = errors.New("watchtree: fenced by a newer lease epoch")

	// ErrNotFound is returned by lookups and mutations of a record that does not exist
	// (GetDeadLetter, DeleteDeadLetter, MarkReplayed with an unknown stream and ID pair).
	ErrNotFound = errors.New("store: not found")
)
