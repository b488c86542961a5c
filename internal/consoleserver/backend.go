package consoleserver

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/watchtree/watchtree/internal/readings"
	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/messages"
)

// Backend is what the console needs from the runtime it inspects. The runtime implements it; the
// console package does not import the runtime (the runtime imports the console). Every method
// is called from the console's own goroutines, never from an actor's, and is bounded by ctx.
type Backend interface {
	// Instance describes the process.
	Instance() Instance
	// Streams lists the registered streams, sorted by name.
	Streams() []StreamRef
	// DeadLetters returns up to limit of the stream's dead letters, oldest first.
	DeadLetters(ctx context.Context, stream string, limit int) ([]*messages.DeadLetterInfo, error)
	// Replay runs one dead letter through the stream's handler again, with refresh after
	// re-reading its document; on success it is deleted. A dead letter that cannot be replayed
	// as asked fails with an error matching ErrUnsupported.
	Replay(ctx context.Context, stream, id string, refresh bool) error
	// Purge deletes one dead letter.
	Purge(ctx context.Context, stream, id string) error
	// Readings returns the figures only MongoDB gives (each stream's dead-letter count, the
	// oplog window) from memory, within readings.Wait: what is not current is marked unknown
	// with the reason, and Unreachable says when MongoDB does not answer.
	Readings(ctx context.Context) readings.Readings
}

// Instance describes the process the console runs in.
type Instance struct {
	// ID is Config.InstanceID (this run), Name Config.InstanceName (the identity across
	// restarts), Host the hostname, Version watchtree's module version.
	ID, Name, Host, Version string
	// Warnings are what is wrong with the instance as a whole, one line each (another live
	// process with the same Name). Instance reads them from memory.
	Warnings []string
	// StartedAt is when the runtime started.
	StartedAt time.Time
}

// StreamRef is one registered stream.
type StreamRef struct {
	// Name is the stream's name.
	Name string
	// Namespace is "db.collection", "db", or "" for a cluster-wide stream.
	Namespace string
	// Mode is status.ModeAllInstances or status.ModeSingleLeader.
	Mode string
	// Cursor is where it reads (status.Stream.Cursor, StreamRow.cursor).
	Cursor string
	// Warnings are the instance's own warnings about the stream (statusx.Local.Warnings), shown
	// after its supervisor's in the row's note.
	Warnings []string
	// Supervisor is the stream's supervisor, nil while its tree is not running.
	Supervisor *actor.PID
}

// local is what the instance knows of the stream besides its supervisor's status.
func (r StreamRef) local() statusx.Local {
	return statusx.Local{Name: r.Name, Mode: r.Mode, Cursor: r.Cursor, Warnings: r.Warnings}
}

// ErrNotFound is what a Backend returns (wrapped) for an unknown stream or dead letter.
var ErrNotFound = errors.New("console: not found")

// ErrUnsupported is what a Backend returns (wrapped) for a command the stream cannot take.
var ErrUnsupported = errors.New("console: not supported")
