// Package statusx reads a stream's status: the one reader of a supervisor's reply (Read, into
// status.Stream, for the Handle, Runtime.Streams and the console alike) and the names of the
// reply's states and lease roles (StateOf, RoleOf) and snapshot reports (SnapshotOf) the actors
// report with. It is the module's own plumbing beside the public status package, which holds
// the type, its names and the console row built from it (status.Row).
package statusx
