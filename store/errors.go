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

	// ErrBackward is returned by a checkpoint Save whose position sorts before the position
	// already stored for the same scope under the same Epoch (see ComparePositions), unless the
	// save is a Rewind. The stored record is left unchanged: it stands, and the writer goes on
	// (a late write of an earlier incarnation, or a post-batch token that sorts before the
	// event before it, must never move a stream back and widen its redelivery window). It is
	// never transient. Implementations name both positions in the error's text.
	ErrBackward = errors.New("store: checkpoint behind the stored position")

	// ErrNotFound is returned by lookups and mutations of a record that does not exist
	// (GetDeadLetter, DeleteDeadLetter, MarkReplayed with an unknown stream and ID pair).
	ErrNotFound = errors.New("store: not found")
)
