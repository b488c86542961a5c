// Package dispatcher is the dispatcher actor of a stream tree: it takes raw change events from
// the stream actor, runs the user's handlers through a Router on ordered lanes, retries, writes
// dead letters, and reports settled events to the checkpointer.
//
// # Protocol (all messages are protobuf, package messages)
//
//	stream actor → Subscribe{incarnation}           (send it as a request: Demand goes to the sender)
//	dispatcher   → Demand{incarnation, credit}       credit = Capacity − events in flight, then more as they settle
//	stream actor → EventBatch{incarnation, raw, post_batch_resume_token, through_seq}   within its credit
//	dispatcher   → Progress{incarnation, through_seq, pbrt}   to the checkpointer, per accepted batch,
//	                                                            before any Settled of that batch
//	dispatcher   → SettledBatch{incarnation, runs: [{first_seq, count, outcome, last_token}]}   to the checkpointer
//	checkpointer → FlowControl{paused, settle_limit, attach}   no new credit while paused; credit within settle_limit
//	runtime      → Drain{timeout_ms} → Drained{settled, unsettled, timed_out}
//	anyone       → DispatcherStatsRequest → DispatcherStats
//
// Credit is additive: each Demand grants that many more events. The dispatcher keeps in-flight
// (accepted, unsettled) plus granted-unused events at or below Config.Capacity, so memory is
// bounded whatever the handler speed. Freed capacity is granted again once it reaches a quarter of
// Capacity, or at once when nothing is in flight. A batch larger than the remaining credit, or a
// batch of an incarnation newer than the last Subscribe, is a bug of the stream actor: the
// dispatcher fails (panics) rather than drop events silently. Under the stream supervisor a
// sibling failure is a death of the stream: the stream actor restarts and subscribes again.
//
// A Subscribe with a newer incarnation replaces the current one; its credit is what the events
// still in flight leave free. Batches of older incarnations that are still queued are dropped
// unread (the new cursor re-reads their events from the checkpointer's position), and so are
// events accepted from an older incarnation that wait on a lane: the lane skips them unhandled
// (lane.superseded), since handling them would be a certain duplicate, run ahead of the new
// cursor's earlier events of the same key, and settle into nothing (the checkpointer ignores a
// rebased incarnation). An event whose first attempt began runs to its end, retries and dead
// letter included, and settles under its incarnation. A SettledBatch
// never mixes incarnations: it carries the incarnation of the EventBatch its events came in, so
// the checkpointer can ignore settlements of incarnations it rebased away from.
//
// The checkpointer is Config.Checkpointer, else the sibling named Config.CheckpointerName
// ("checkpointer") under the same parent, else whatever AttachCheckpointer names. On start the
// dispatcher sends AttachDispatcher{its PID, attach} to it, so FlowControl finds its way back;
// with Config.AwaitSettleLimit also on every Subscribe of a newer incarnation (a restarted
// checkpointer learns of it that way), and it then grants no credit until the answer.
//
// The settle limit bounds the settled events no successful checkpoint write covers: once the
// answer to the latest attach carried a settle_limit, credit is granted only while the
// settlements taken since that attach + events in flight + unused credit stay within it, and
// settlements are sent before the attach so that the checkpointer counts from the same point. A
// FlowControl whose attach is not the latest is dropped.
//
// # Lanes and order
//
// Config.Lanes goroutines, owned by the actor, process events. An event goes to lane
// FNV-1a(documentKey bytes) mod Lanes; a lane processes its events strictly one after the other,
// so events of one document are handled in order and different documents run in parallel. With
// one lane everything is sequential. Events without a documentKey (drop, rename, dropDatabase,
// invalidate; also events too malformed to have one) are barriers when Lanes > 1: such an event
// starts once every earlier event has settled, and later events start once it has settled.
//
// Per event, a lane calls Router.Route once, then Invocation.Call once per attempt with a context
// that is cancelled when the dispatcher stops (or a drain times out). Panics of Route or Call are
// recovered into a *panicError carrying runtime/debug.Stack (which includes the panic site) and
// treated like a returned error; a panicking Route (a Filter) is routed again on the next
// attempt. A Call or Route that ends its goroutine with runtime.Goexit fails that attempt with
// ErrHandlerGoexit (retryable), and the lane continues from the same event in a new goroutine.
// An error is classified by Router.Classify, except that a non-panic Route error (a
// decode error) is always Permanent:
//   - Retryable: after attempt n the lane waits the n-th delay of Config.Retry (policy.Retry
//     states the formula) on Config.Clock, blocking only that lane, then calls again; after
//     MaxAttempts attempts the event is dead-lettered;
//   - Permanent: dead-lettered at once;
//   - Skipped: settles OUTCOME_SKIPPED without a dead letter; logged at INFO and reported.
//
// An event settles OUTCOME_HANDLED when Call returned nil, OUTCOME_UNHANDLED or OUTCOME_FILTERED
// as Route said, OUTCOME_SKIPPED as above, and OUTCOME_DEAD_LETTERED only after
// DeadLetterWriter.PutDeadLetter returned nil. The dead letter's ID is the event ID (the resume
// token's _data), so a redelivered event overwrites its record. A failing write is retried
// forever with the RetryPolicy delays (write n waits Delay(n)), reported as DeadLetterFailed and
// logged at ERROR; the lane stays blocked on that event, so nothing behind it is skipped and the
// checkpoint cannot pass it. With Config.DeadLetters nil, an exhausted event is logged at ERROR,
// reported as DeadLettered{Dropped: true}, counted as dropped and settles without a record.
// FirstAttemptAt and LastAttemptAt are the clock readings when the first and last failed attempts
// ended.
//
// # Batches
//
// A Router that is also a Batcher (a Transactional stream with TxBatch) gets the events queued
// on a lane, from the current one, as one unit, within its BatchLimits; events it does not hand
// an Invocation end a batch. A failed batch is split in halves (Batcher said so) or its events
// run alone; see batch.go.
//
// # Settlements
//
// Lanes append each settlement to a buffer shared with the actor (one lock per event) and wake
// the actor with at most one outstanding LanesSettled message: when the buffer holds
// Config.SettleBatch settlements, when a lane's queue runs empty, or when a lane is about to
// block (retry delay, dead-letter retry). While events are in the lanes the actor also takes the
// buffer every Config.SettleFlushInterval, so a settlement whose lane went on to a handler that
// blocks waits at most that long. (With SettleBatch 1 every settlement wakes the actor and no
// timer runs.) The actor sends SettledBatch messages of at most Config.SettleBatch events: full
// batches at once, a partial one at once when nothing is in flight, a lane is about to block, or
// on the flush tick. A catch-up thus wakes the actor about once per change-stream batch, not each
// time a lane finds it asleep (which, at a few microseconds per event, was every hundred or so
// events, and each wake-up is a goroutine hand-over).
//
// # Drain and stop
//
// Drain stops accepting batches (later ones are dropped; their events are unsettled and re-read on
// the next start), lets every accepted event finish, retries and dead-letter writes included,
// sends the last SettledBatch, then answers Drained. When the deadline (Drain.timeout_ms, else
// Config.DrainTimeout) passes first, the lanes are cancelled and Drained reports timed_out and the
// unsettled count. After Drained the dispatcher grants no more credit.
//
// On *actor.Stopping and *actor.Restarting the lanes' context is cancelled, the actor waits for
// the lane goroutines (at most Config.StopTimeout), and sends what settled. Events interrupted or
// still queued stay unsettled: the checkpoint never passes them and they are redelivered.
package dispatcher
