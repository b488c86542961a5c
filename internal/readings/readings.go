// Package readings holds the shapes of the figures only MongoDB can give (each stream's
// dead-letter count, the oplog window) as the runtime keeps them in memory, and the one wording
// of a server that does not answer. The engine fills them; the console reads them, and the root
// package converts them to watchtree.ServerReadings, which documents the fields.
package readings

import (
	"fmt"
	"time"
)

// Wait bounds a request's wait for the refresh it starts (50ms): a server that answers within
// it gives current figures, any other the last known ones, marked unknown.
const Wait = 50 * time.Millisecond

// Reading is the state of one figure read from MongoDB: At is when it was last read (zero:
// never), Unknown why the value is not current ("" while it is).
type Reading struct {
	At      time.Time
	Unknown string
}

// Count is one stream's dead-letter count as last read.
type Count struct {
	N int
	Reading
}

// Oplog is the oplog window (cluster times of its oldest and newest entries) as last read.
type Oplog struct {
	Oldest, Newest time.Time
	Reading
}

// Readings are the figures only MongoDB can give, from memory.
type Readings struct {
	// Unreachable is "" while MongoDB answered the latest read, else the one wording of that
	// condition (see Unreachable).
	Unreachable string
	// DeadLetters is the count of every registered stream, by name.
	DeadLetters map[string]Count
	// Oplog is the oplog window.
	Oplog Oplog
}

// Unreachable is the one wording of a MongoDB that does not answer, everywhere it is shown:
// "MongoDB unreachable since 15:04:05 UTC (42s): <cause>".
func Unreachable(since, now time.Time, cause string) string {
	return fmt.Sprintf("MongoDB unreachable since %s UTC (%v): %s", since.UTC().Format("15:04:05"),
		now.Sub(since).Round(time.Second), cause)
}
