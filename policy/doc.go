// Package policy holds, once, the rules of a watchtree stream's policies in the form the actors
// take them in their Config: the defaults, the validators and the delay formula of Retry
// (dispatcher.Config.Retry), Restart (supervisor.Config.Policy), Checkpoint, StartPosition and
// HistoryLost (checkpointer.Config), Lease (leader.Config.Policy), Snapshot (snapshot.Config.Policy)
// and Invalidate (the stream actor). It is public so that code outside the module can build an
// actor's Config; a watchtree user fills in the root package's names for them.
//
// The root package's RetryPolicy, RestartPolicy, CheckpointPolicy, LeasePolicy, SnapshotPolicy,
// Balance, SnapshotMode, StartPosition, HistoryLostPolicy and InvalidatePolicy are aliases of
// Retry, Restart, Checkpoint, Lease, Snapshot, Balance, SnapshotMode, StartPosition, HistoryLost
// and Invalidate, and its values (Resume, Latest, At, Fail, ResumeFromNow, Rebuild,
// RebuildFromSnapshot, InvalidateStop, ...) are the ones here: each is declared and documented
// once, here. The Observer's events name a HistoryLost or an Invalidate by its String.
//
// The methods of these types are only Validate and String. Validate returns the broken rules as
// *configerr.Error values (joined with errors.Join) that name the field with the root package's
// type name, e.g. "RetryPolicy.Multiplier", and match configerr.ErrInvalid. What the tree needs
// besides (the defaults filled in, the broken rules reported under a path of the caller's
// choosing, the backoff formula of Retry and Restart, and what the unexported fields of
// StartPosition and HistoryLost hold) is unexported here and reached through the module's
// internal/policyx: a user never calls it.
package policy
