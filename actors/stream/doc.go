// Package stream is the stream actor of a stream tree: it owns the change-stream cursor of one
// stream, reads it on a goroutine of its own, and feeds raw events to the dispatcher within the
// dispatcher's credit. It is the restartable child of the
// stream supervisor (actors/supervisor); its siblings are the checkpointer and the dispatcher.
//
// # Protocol (all messages are protobuf, package messages)
//
//	Started       → checkpointer  ResolveStart{incarnation}            (a request: StartFrom comes back)
//	checkpointer  → StartFrom{incarnation, kind, token | operation_time, next_seq, reason, terminal, source, cause}
//	                  RESUME_AFTER / START_AFTER / START_AT_OPERATION_TIME: open the cursor (reader goroutine)
//	                  FAIL, terminal: do nothing; the checkpointer already escalated, the supervisor stops us
//	                  FAIL, not terminal: fail (supervisor.Fail, an *actorError wrapping errStartFailed and cause)
//	                    → the supervisor's classifier: backoff, or crashed for a server error no restart fixes
//	open failed with a history-lost code (HistoryLostCodes; also a getMore before the first event)
//	              → checkpointer  HistoryLost{incarnation, code, message}   (a request) → another StartFrom
//	cursor open   → parent        Resubscribed{incarnation}   (supervisor.NotifyResubscribed: attempts reset)
//	              → dispatcher    Subscribe{incarnation}      (a request, once per incarnation)
//	dispatcher    → Demand{incarnation, credit}               additive; other incarnations are dropped
//	reader        → dispatcher    EventBatch{incarnation, raw[], ends_with_invalidate, post_batch_resume_token, through_seq}
//	anyone        → StreamStatsRequest → StreamStats
//
// The incarnation is streamtree.Incarnation(ctx); an actor running without a stream supervisor
// numbers itself from a process-wide counter. Seqs start at StartFrom.next_seq and grow by one
// per event, without gaps, within the incarnation (across reopens after an invalidate too).
//
// # Reading
//
// The reader goroutine calls Watcher.Open (blocking I/O, never on the actor goroutine), posts
// ReaderOpened to the actor, then loops: it waits for credit (a counter the actor feeds from
// Demand, with a one-slot wake-up channel: no polling), then calls Cursor.TryNext up to
// min(credit, MaxBatch) times, stopping early when the driver's buffered batch is exhausted (so
// events are never held while a getMore waits) or at an invalidate. Each event's raw BSON is
// handed on as the cursor gives it when the cursor's Current stays valid (ChangeStreamCursor:
// the driver reads each reply into new memory), else copied; its resume token is its own _id. The batch's post_batch_resume_token is Cursor.ResumeToken() after the last event
// (the server's PBRT once the batch is exhausted, else the last _id), and through_seq the seq of
// its last event. A round in which TryNext found nothing (one getMore, which waits up to
// MaxAwaitTime on the server) sends an EventBatch without events, carrying only the PBRT, and only
// when the PBRT changed since the last one sent; such a batch needs no credit. Consequently at
// most the granted credit of events is ever in flight, and memory is bounded by the dispatcher's
// capacity plus one driver batch. The goroutine sends batches directly to the dispatcher
// (sender-less), so the actor's mailbox is not on the event path.
//
// # Split events
//
// An event over 16 MiB read with $changeStreamSplitLargeEvent arrives as fragments, each with
// splitEvent {fragment, of} and a resume token of its own, one per getMore. The reader joins them
// before anything is sent: the dispatcher gets one event (one seq, one unit of credit) with the
// top-level fields of every fragment, in order, whose _id and resume_token are the last
// fragment's, so settling it means "resume after the whole event". A split event begun within the
// credit is read to its end even past it; no post_batch_resume_token is ever taken from inside
// one (a batch that ends with fragments held reports its last whole event's token, an empty round
// none). The driver resuming by itself inside a split event (it resumes after the last fragment
// it returned) continues the same reassembly; a new cursor starts from a settled position, so
// outside any split event. Fragments out of sequence fail the reader (a cursor death: the stream
// restarts from its checkpoint).
//
// # Failures
//
// The driver resumes a change stream once by itself on a resumable error (network errors,
// ResumableChangeStreamError-labelled errors, CursorNotFound). An error that survives it —
// TryNext false with Err set — ends the reader, which posts ReaderEnded; the actor logs it and
// fails (supervisor.Fail, no panic) with an *actorError wrapping errCursor
// and the driver's error. The supervisor's classifier decides: a transient error restarts it
// after the RestartPolicy delay (a new instance, a new incarnation, a new ResolveStart: the
// checkpointer answers its newest settled position), a terminal one (a server error no restart
// can fix, such as an unknown pipeline stage) crashes the stream at once. The same happens when
// Open fails (other than history lost) and when the server closes the cursor without an
// invalidate (errCursorClosed).
//
// # Invalidate
//
// An invalidate event (drop, rename, dropDatabase) is sent to the dispatcher as an ordinary event,
// the last of its batch, with no post_batch_resume_token (the server's PBRT there is the
// invalidate token, which must never become a resumeAfter position). The reader then closes the
// cursor and ends. With Config.InvalidateRestart the actor reopens, in the same incarnation, with
// startAfter the invalidate's token (seqs continue); otherwise it fails with an *actorError wrapping
// streamtree.ErrInvalidated, which the supervisor's classifier treats as terminal.
// Both are reported (observe.Invalidated, with the operationType read right before the
// invalidate as its cause). Every cursor open is reported as observe.Started: a reopen at once, the first open
// of an incarnation when the dispatcher's Demand answers its Subscribe, so that no handler call of
// an earlier incarnation's queued events starts after the report. A resumeAfter refused with InvalidResumeToken (260) — the resolved
// position is an invalidate's token — is retried once, at once, with startAfter the same token.
//
// # Stopping
//
// On *actor.Restarting and *actor.Stopping the reader's context is cancelled. The goroutine then
// drops what it read but did not send (those events are re-read from the checkpointer's position),
// closes its cursor (killCursors, bounded by CloseTimeout on a fresh context) and ends, without
// reporting; the actor never waits for it. Messages of an older incarnation or reader generation
// are dropped.
package stream
