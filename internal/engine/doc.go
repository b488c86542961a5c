// Package engine is the wiring behind the public watchtree package. The root keeps the API
// (Config, Runtime, Stream[T], Event[T], Handle, errors) and compiles each Stream[T] into a Spec,
// the non-generic form this package takes, the generic piece (decoding and calling the handlers)
// staying behind Spec.Router. watchtree.Runtime wraps a Runtime and watchtree.Handle an Entry.
//
// Runtime (runtime.go) is the registry of the streams, the actor system, the Observer's queue
// (safeObserver, observer.go), the console and its backend (console.go), the store sets and the
// background index creation (stores.go, indexes.go), the SingleLeader balancer and dead-letter
// fencing (leases.go), and the ordered shutdown. Entry (entry.go) is one stream: its
// supervisor's PID and last reply, the wait for a running stream, the graceful stop. tree.go
// builds a stream's actor tree (supervisor, checkpointer, dispatcher, stream actor, snapshot,
// on-demand snapshot and leader actors); watch.go and bound.go open its change streams with the
// driver, every wait for the server bounded; snapshot.go reads its collection for snapshots;
// classify.go says which failures are terminal; records.go lists, counts, replays and purges
// dead letters and lists checkpoints.
//
// This package never imports the root: the types both need live here, in observe/, in
// policy/, in store/ or in the actor packages. Its sentinel errors are re-exported by the root
// under the same names.
package engine
