// Package store holds the durable records of a stream tree and the sentinel errors every store
// implementation returns: a stream's resume position (Checkpoint), the record of history skipped
// on purpose (Gap), the record of an event whose attempts ran out (DeadLetter) and the progress of
// a copy of a collection's existing documents (Snapshot); and the lease of a SingleLeader stream
// (Lease) with the heartbeats of the instances that share the leaderships out (Instance). Every
// record but the last two belongs to a Scope: the stream, and for an AllInstances stream the
// instance, so that each instance keeps its own position, dead letters, gaps and snapshot; the
// shared scope (no instance) is a SingleLeader stream's.
//
// The package also defines each store contract once, as one interface with what each method
// guarantees and the errors it returns: CheckpointStore, DeadLetterStore, GapStore, SnapshotStore and LeaseStore. The root package's Config takes
// them (one field each), store/storetest's contract suites test them, and each actor either
// takes one or declares the subset of its methods it calls (a subset every implementation of
// the store interface satisfies). store/memstore (in memory, for tests and benchmarks),
// store/mongostore (MongoDB, the default) and store/redisstore (Redis: checkpoints and leases)
// implement them and pass the suites.
//
// Records are plain values. Implementations copy the byte slices (bson.Raw) they are given and
// the ones they return, so a caller may reuse its buffers.
package store
