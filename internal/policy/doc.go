// Package policy defines, once, the policies of a watchtree stream: Retry (handler retries,
// applied by the dispatcher actor), Restart (restarts of a crashed stream, applied by the
// supervisor actor), Checkpoint (when the resume position is persisted), StartPosition (where a
// new stream starts) and HistoryLost (what a stream does when its position has left the oplog),
// the last three applied by the checkpointer actor, and Invalidate (what a stream does after an
// invalidate event, applied by the stream actor). Each type carries its defaults, its one
// validator and, for Retry and Restart, its delay formula.
//
// Users normally reach these types through the root package, which re-exports them under their
// public names with type aliases: watchtree.RetryPolicy is Retry, watchtree.RestartPolicy is
// Restart, watchtree.CheckpointPolicy is Checkpoint, watchtree.StartPosition is StartPosition,
// watchtree.HistoryLostPolicy is HistoryLost (with watchtree.Resume, Latest, At, Fail,
// ResumeFromNow and Rebuild) and watchtree.InvalidatePolicy is Invalidate. The actors take the
// same types in their Config (and package observe in its events), so a field added here
// reaches both the user's Stream and the actor that applies it without any copy.
//
// The zero value of every field means its documented default; WithDefaults fills the defaults
// in. Validate returns the broken rules as *ConfigError values (joined with errors.Join) that
// name the field with the root package's type name, e.g. "RetryPolicy.Multiplier", and match
// ErrInvalidConfig. ValidateInto adds the same rules to an Errors collector under a path of the
// caller's choosing: a watchtree.Stream reports `Stream "orders": Retry.Multiplier ...`.
package policy
