// Package watchtree runs MongoDB change-stream consumers inside a Go service, each as a
// supervised actor tree (protoactor-go), with at-least-once delivery, per-document ordering,
// checkpoints, retries, dead letters and restarts that the user controls.
//
// # What a user writes
//
//	rt, err := watchtree.New(watchtree.Config{Client: client, Database: "shop", Logger: logger})
//	err = rt.Start(ctx)
//	h, err := rt.Spawn(ctx, watchtree.Stream[Order]{
//		Name:       "order-stream",
//		Collection: "orders",
//		Lanes:      8,
//		Retry:      watchtree.RetryPolicy{MaxAttempts: 5},
//		OnInsert: func(ctx context.Context, ev *watchtree.Event[Order]) error {
//			return charge(ctx, ev.ID(), ev.FullDocument) // ev.ID() is stable across redeliveries
//		},
//	})
//	defer rt.Stop(ctx)
//
// A Stream[T] is a value describing one consumer; it satisfies the non-generic Spec interface
// the runtime accepts, because Go methods cannot have type parameters. The zero value of every
// policy field means its documented default, and Validate (run by Spawn) fails fast with a
// *ConfigError naming the field and the rule.
//
// # Guarantees
//
//   - At least once, never silent loss: a resume position is persisted only for settled events.
//     An event settles when its handler returned nil or Skip, the Filter rejected it, no handler
//     matched, or its dead letter was durably written. A failed dead-letter write leaves the
//     event unsettled; it is retried, never skipped.
//   - Order per document: events of one document key are handled in order, on one lane.
//   - Stable identity: Event.ID is the resume token's _data, the same on every redelivery.
//   - Positions per mode: an AllInstances stream (the default) keeps a checkpoint, dead letters
//     and gap records per instance (Config.InstanceName), so an instance resumes only from its
//     own position; CheckpointPolicy.Ephemeral keeps none, for state rebuilt at start; a
//     SingleLeader stream keeps one shared position, written by the lease holder.
//   - Explained: every lifecycle change, retry, dead letter, checkpoint, history loss and gap is
//     logged with the stream name and reported to the Observer (package observe), which can never
//     block or break the runtime.
//
// # Errors
//
// Handler errors are retried by the RetryPolicy unless marked with Permanent (dead letter at
// once) or made by Skip (settle on purpose, no dead letter). Decode errors are permanent.
// Terminal stream failures match the sentinels ErrHistoryLost, ErrGaveUp, ErrInvalidated and
// ErrFenced with errors.Is; a server error no restart can fix (a Pipeline the server refuses,
// authentication) is terminal too, and reported as the server's own error.
//
// # Where to look
//
// Start with Config, New and Runtime (Start, Stop, Spawn, Streams, Handle), then Stream and
// Event; the policies (RetryPolicy, RestartPolicy, CheckpointPolicy, DeadLetterPolicy) say what
// happens when things fail, and DeadLetters and Replay what an operator does about it.
// TestEvent builds the Event a handler receives, for a unit test without a server. The actors
// live under actors/, their protobuf messages under messages/, the store contracts under
// store/, the Observer's events under observe/; the wiring is behind internal/engine.
package watchtree
