// Package checkpointer is the checkpointer actor of a stream tree: it resolves where the stream
// actor opens its change stream (the resume cascade), applies OnHistoryLost, tracks the
// low-water mark of settled events across the dispatcher's lanes and persists the resume
// position.
//
// # Protocol (messages in package messages, checkpointer.proto and stream.proto)
//
//   - ResolveStart{incarnation} (a request from the stream actor) → StartFrom{incarnation, kind,
//     token | operation_time, next_seq, reason, terminal, source}. The cascade: the in-memory
//     position of this instance (the newest settled position, even if not yet written); else
//     the stored checkpoint; else the current position captured through PositionSource and
//     persisted (Source "initial") before the reply. StartPosition Latest/At replace the cascade
//     until one start succeeded. A capture, load or persist failure answers a non-terminal FAIL
//     whose cause is the error (its server code included), for the supervisor's classifier.
//     A newer incarnation rebases the tracker: seqs continue at StartFrom.next_seq, and Progress
//     and SettledBatch of older incarnations are dropped (the new cursor re-reads their events).
//   - HistoryLost{incarnation, code, message} (a request) → StartFrom. Fail: a terminal FAIL,
//     and the checkpointer escalates a failure wrapping streamtree.ErrHistoryLost, so the supervisor
//     gives up; the stream actor must not fail by itself on a
//     terminal FAIL. ResumeFromNow: capture, gap record (retried until written), persist,
//     RESUME_AFTER. Rebuild(fn): capture T, fn, gap record, persist T, START_AT_OPERATION_TIME T.
//   - Progress{incarnation, through_seq, pbrt} and SettledBatch{incarnation, runs} from the
//     dispatcher feed the low-water mark (see tracker): the position is the token of the
//     low-water-mark event, or a PBRT once every seq up to its through_seq settled, whichever is
//     newer. It never passes an unsettled event; an invalidate's token becomes a startAfter
//     position (Source "invalidate"), never a resumeAfter one: the stream actor flags the
//     invalidate Event and the dispatcher copies the flag to its Settled.
//   - Flush{} (a request) → Flushed{token, start_after, low_water_mark, error, fenced} once the
//     write of the position current at the Flush has ended.
//   - SettledThrough{cluster_time} to the parent supervisor when the cluster time of the
//     position moved forward (the token's, else a start's operation time): every event before
//     it has settled. At most every 50ms on the injected clock (the newest of a faster run),
//     at once before a Flushed and on stop; the supervisor answers AwaitCaughtUp with it.
//   - FlowControl{paused, settle_limit, attach} to the dispatcher, whose PID comes from
//     Config.Dispatcher or the latest AttachDispatcher{address, id, attach}; every
//     AttachDispatcher is answered at once (see Bound of unflushed progress).
//
// # Scope, migration, retention, ephemeral streams
//
// Config.Instance is the instance part of the key of the checkpoint and the gaps (the root sets
// it for an AllInstances stream, and leaves it empty for the shared SingleLeader position). An
// instance that finds no checkpoint of its own, under StartPosition Resume, loads the shared one
// (the layout of earlier versions); unless it is older than Checkpoint.Retention it persists it
// as its own (Source "migrated", an invalidate position keeping its Source) before the reply, so
// it is taken once, and leaves the shared record alone. Every write of an instance's checkpoint
// carries ExpiresAt = UpdatedAt + Checkpoint.Retention; the shared one never expires. With
// Checkpoint.Ephemeral no checkpoint is loaded or written: a start without an in-memory
// position captures the current one (source "latest"); a due write only marks the position
// flushed (so the settle limit keeps growing and Flush is answered at once); lost history still
// records its gap.
//
// # Writes
//
// Config.Checkpoint (watchtree.CheckpointPolicy documents the defaults) says when. A position change is written
// when SaveEvery settlements accumulated since the last write issued, when SaveInterval passed
// since the first change not covered by a write issued, or IdleInterval when no event settled
// since then and only the PBRT moved (an idle stream's token is written at most once per
// IdleInterval), and on Flush.
// A position equal to the stored one is never rewritten. At most one write is in flight; the
// next one carries the latest position. A failed write is reported (observe.CheckpointFailed)
// and retried after min(RetryInitialDelay × 2^(n-1), RetryMaxDelay) on the injected clock for
// the n-th consecutive failure, with the latest position. A write refused with store.ErrFenced
// stops the checkpointer: it answers nothing but FAIL/fenced from then on, logs it and
// escalates a failure wrapping the store's error (store.ErrFenced).
//
// # Bound of unflushed progress
//
// The checkpointer counts the Settled entries it receives (all of them, whatever their
// incarnation: the dispatcher counts every settlement it sends), from the dispatcher's latest
// AttachDispatcher. Its flush mark is that count when the last successful write was taken, or
// when the durable position was already the current one (settlements above an unsettled event
// cannot be covered better). It sends the dispatcher
//
//	settle_limit = flush mark + MaxUnflushed   (counted from the attach)
//
// on every attach and whenever it grows, and the dispatcher grants credit only while its
// settlements since the attach + events in flight + unused credit ≤ settle_limit. Events in
// flight can therefore never settle past the limit, and whatever the outage length:
//
//	settlements not covered by a successful write ≤ MaxUnflushed
//
// so at most MaxUnflushed settled events (plus those in flight and unsettled) are replayed
// after a crash. With a healthy store the bound is SaveEvery settlements or SaveInterval of
// progress, plus the write in flight. FlowControl{paused: true} reports that the limit is
// reached while the store fails; FlowControl{paused: false} follows the next successful write.
// A FlowControl echoes the attach it counts from; the dispatcher drops one of an earlier attach.
//
// # Concurrency
//
// All store I/O, PositionSource calls and the Rebuild function run on one goroutine owned by the
// actor instance (a job queue), started on Started and cancelled on Stopping and Restarting.
// Each store and PositionSource call gets Config.IOTimeout, so an unreachable server cannot
// hold the queue (the Rebuild function is not bounded).
// Their results, and the ticks of the timers (Config.Clock), come back to the actor as messages
// stamped with the instance (and a generation); stale ones are dropped. Those internal messages
// never leave the actor and carry Go errors, so they are Go values; every message exchanged with
// other actors is protobuf. The Observer (Config.Observer) is called on the actor goroutine.
package checkpointer
