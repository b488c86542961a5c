// Package policy defines, once, the policies of a watchtree stream: Retry (handler retries,
// applied by the dispatcher actor), Restart (restarts of a crashed stream, applied by the
// supervisor actor), Checkpoint (when the resume position is persisted), StartPosition (where a
// new stream starts) and HistoryLost (what a stream does when its position has left the oplog),
// the last three applied by the checkpointer actor, and Invalidate (what a stream does after an
// invalidate event, applied by the stream actor). Each type carries its defaults, its one
// validator and, for Retry and Restart, its delay formula.
//
// Users reach these types only through the root package, which re-exports them under their
// public names with type aliases: watchtree.RetryPolicy is Retry, watchtree.RestartPolicy is
// Restart, watchtree.CheckpointPolicy is Checkpoint, watchtree.LeasePolicy is Lease,
// watchtree.SnapshotPolicy is Snapshot, watchtree.StartPosition is StartPosition,
// watchtree.HistoryLostPolicy is HistoryLost (with watchtree.Resume, Latest, At, Fail,
// ResumeFromNow, Rebuild and RebuildFromSnapshot) and watchtree.InvalidatePolicy is Invalidate.
// The actors take the same types in their Config (and package observe in its events), so a
// field added here reaches both the user's Stream and the actor that applies it without any
// copy.
//
// Because the aliases make every exported method of these types public API, the methods are
// only what a user calls: Validate and String. What the tree needs is package-level functions:
// WithDefaults fills the defaults in (the zero value of every field means its documented
// default), ValidateInto adds a policy's broken rules to an Errors collector under a path of the
// caller's choosing (a watchtree.Stream reports `Stream "orders": Retry.Multiplier ...`),
// ValidateStartInto ties a Checkpoint to its StartPosition, Delay is the backoff formula of Retry
// and Restart, and StartKindOf, HistoryLostKindOf, StartTime, OperationTime, RebuildFunc,
// SnapshotEnabled and MarshalFilter read what the unexported fields hold. Validate returns the
// broken rules as *ConfigError values (joined with errors.Join) that name the field with the
// root package's type name, e.g. "RetryPolicy.Multiplier", and match ErrInvalidConfig.
package policy
