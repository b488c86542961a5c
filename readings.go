package watchtree

import (
	"context"
	"time"

	"github.com/watchtree/watchtree/internal/readings"
)

// ServerReadings are the figures only MongoDB gives, as the runtime keeps them in memory. Every
// figure carries a Reading: when it was last read, and why its value is not current (MongoDB
// unreachable, the read's own error such as an oplog the client may not read, with the age of
// the last known value); the value is then the last known one.
type ServerReadings struct {
	// Unreachable is "" while MongoDB answered the latest read, else the one wording of that
	// condition, as the console and the CLI show it: "MongoDB unreachable since 15:04:05 UTC
	// (42s): <cause>" (a read that failed as a timeout or network error, or one unanswered for
	// 1s).
	Unreachable string
	// DeadLetters holds, by stream name, each registered stream's dead-letter count (as
	// CountDeadLetters counts it).
	DeadLetters map[string]DeadLetterCount
	// Oplog is the oplog window (as OplogWindow reads it).
	Oplog OplogReading
}

// Reading is the state of one figure of ServerReadings.
type Reading struct {
	// At is when the figure was last read; zero: never.
	At time.Time
	// Unknown is why the value is not current, "" while it is (read within the last 2s).
	Unknown string
}

// DeadLetterCount is one stream's dead-letter count in ServerReadings.
type DeadLetterCount struct {
	// N is the number of dead-letter records of the stream (this instance's, for an
	// AllInstances stream), as last read.
	N int
	Reading
}

// OplogReading is the oplog window in ServerReadings.
type OplogReading struct {
	// Oldest and Newest are the cluster times of the oplog's oldest and newest entries, as last
	// read; zero when never read.
	Oldest, Newest time.Time
	Reading
}

// serverReadings is r in the public shape, which has internal/readings' field lists: Reading is
// a struct conversion (it does not compile when the lists drift); the count and the window embed
// a Reading of another type, so they are rebuilt field by field, and TestServerReadingsKeepEveryField
// fails when a field is left out.
func serverReadings(r readings.Readings) ServerReadings {
	out := ServerReadings{Unreachable: r.Unreachable, Oplog: OplogReading{Oldest: r.Oplog.Oldest, Newest: r.Oplog.Newest,
		Reading: Reading(r.Oplog.Reading)}}
	if r.DeadLetters != nil {
		out.DeadLetters = make(map[string]DeadLetterCount, len(r.DeadLetters))
		for name, c := range r.DeadLetters {
			out.DeadLetters[name] = DeadLetterCount{N: c.N, Reading: Reading(c.Reading)}
		}
	}
	return out
}

// Readings returns the ServerReadings from memory, for a console or a metrics scrape that must
// answer while MongoDB is slow or unreachable: it never waits on the server. When the readings
// are older than 2s it starts a refresh off the caller's path (one at a time, each read bounded
// by Config.ConnectTimeout) and waits for it at most 50ms, or until ctx ends; a server that
// answers within that gives current figures, any other the last known ones marked unknown.
// Before Start and after Stop every figure is unknown.
func (rt *Runtime) Readings(ctx context.Context) ServerReadings {
	return serverReadings(rt.e.Readings(ctx, 0))
}
