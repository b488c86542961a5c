package watchtree

import (
	"context"

	"github.com/watchtree/watchtree/internal/readings"
)

// ServerReadings are the figures only MongoDB gives, as the runtime keeps them in memory:
//
//   - Unreachable is "" while MongoDB answered the latest read, else the one wording of that
//     condition, as the console and the CLI show it: "MongoDB unreachable since 15:04:05 UTC
//     (42s): <cause>" (a read that failed as a timeout or network error, or one unanswered for
//     1s);
//   - DeadLetters holds, by stream name, each registered stream's dead-letter count N (as
//     CountDeadLetters counts it);
//   - Oplog holds the oplog window's Oldest and Newest cluster times (as OplogWindow reads
//     them).
//
// Every figure carries At, when it was last read (zero: never), and Unknown, why the value is
// not current ("" while it is: read within the last 2s): MongoDB unreachable, the read's own
// error (an oplog the client may not read), with the age of the last known value. The value is
// then the last known one.
type ServerReadings = readings.Readings

// Readings returns the ServerReadings from memory, for a console or a metrics scrape that must
// answer while MongoDB is slow or unreachable: it never waits on the server. When the readings
// are older than 2s it starts a refresh off the caller's path (one at a time, each read bounded
// by Config.ConnectTimeout) and waits for it at most 50ms, or until ctx ends; a server that
// answers within that gives current figures, any other the last known ones marked unknown.
// Before Start and after Stop every figure is unknown.
func (rt *Runtime) Readings(ctx context.Context) ServerReadings { return rt.e.Readings(ctx, 0) }
