// Package status is a stream's status: the one Go shape of what a stream's supervisor reports
// (messages.StatusReply), returned by watchtree's Handle.Status (watchtree.StreamStatus names
// Stream) and by Runtime.Streams, and the one the console's rows and the watchtree CLI's tables
// and JSON are built from. The state names (State), the lease roles and the mode names are
// declared here once, for all of them, with Row, the one mapping of a status to the console's
// row. The reader of the supervisor's reply is the module's own (internal/statusx).
//
// It is a package of its own, a leaf (it imports observe, messages and internal/tokentime, and
// nothing that starts the runtime), because the console cannot import the root package: the
// root imports the engine, which starts the console. A type in the root would need a second
// copy for the console, which is what this package replaces (the supervisor's reply, an
// internal reading of it, the Handle's struct and the console row, each mapped by hand, with
// fields renamed between them). The root declares aliases (watchtree.StreamStatus,
// watchtree.StreamState, watchtree.StateRunning, ...) so that code written against the root
// keeps its names.
package status
