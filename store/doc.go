// Package store holds the durable records of a stream tree and the sentinel errors every store
// implementation returns: a stream's resume position (Checkpoint), the record of history skipped
// on purpose (Gap), the record of an event whose attempts ran out (DeadLetter) and the progress of
// a copy of a collection's existing documents (Snapshot). Every record belongs to a Scope: the
// stream, and for an ALL_INSTANCES stream the instance, so that each instance keeps its own
// position, dead letters, gaps and snapshot; the shared scope (no instance) is a SINGLE_LEADER
// stream's.
//
// The package defines no store interface. Each consumer defines the small interface it needs where
// it is used (actors/checkpointer: Load/Save and RecordGap; actors/dispatcher: PutDeadLetter; the
// root: CheckpointStore, DeadLetterStore and GapStore, the store fields of watchtree.Config, which
// add checkpoint and dead-letter listing and replay). store/memstore (in memory, for tests and benchmarks) and
// store/mongostore (MongoDB) implement all of them, and store/storetest holds the contract suites
// both pass.
//
// Records are plain values. Implementations copy the byte slices (bson.Raw) they are given and
// the ones they return, so a caller may reuse its buffers.
package store
