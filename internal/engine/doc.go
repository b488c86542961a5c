// Package engine is the wiring behind the public watchtree package: it turns a compiled stream
// (Spec) into a supervised actor tree and keeps the runtime's share of it — the driver-backed
// change streams and their bounds, the store sets and their indexes, snapshot sources, the
// classification of failures, the lease balancer and the dead-letter fencing.
//
// The root package keeps the public API (Config, Runtime, Stream[T], Event[T], Handle) and
// compiles each Stream[T] into a Spec, the only generic piece (decoding and calling the
// handlers) staying behind Spec.Router. This package never imports the root: the types both need
// live here, in policy/, in store/ or in the actor packages.
package engine
