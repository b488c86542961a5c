package dispatcher

import (
	"time"

	"go.uber.org/zap"
)

// Events receives the dispatcher's typed reports; the root maps them onto watchtree.Observer.
//
// Methods are called from the lane goroutines (Counted: from the actor's goroutine), several at
// a time, so an implementation must be safe for concurrent use. They must not block: hand the
// value to a channel or counter of your own. A panic in a method is recovered and logged; it
// never breaks a lane.
type Events interface {
	// RetryScheduled: an attempt failed with a retryable error; the next one runs after Delay.
	RetryScheduled(RetryScheduled)
	// DeadLettered: the event's dead letter was written (or, with dead letters disabled, the
	// event was dropped: Dropped is set). The event settles right after.
	DeadLettered(DeadLettered)
	// DeadLetterFailed: writing a dead letter failed; it is retried after Delay and the event
	// stays unsettled meanwhile.
	DeadLetterFailed(DeadLetterFailed)
	// Skipped: the handler returned a Skipped-class error; the event settles OUTCOME_SKIPPED.
	Skipped(EventSkipped)
	// HandlerPanicked: the Router or the handler panicked; the panic is an error of the event.
	HandlerPanicked(HandlerPanicked)
	// Counted reports the dispatcher's cumulative outcome counters after each SettledBatch it
	// sends (so at most once per batch, never per event).
	Counted(Counts)
}

// RetryScheduled reports a failed attempt that will be retried.
type RetryScheduled struct {
	Seq     uint64        // the event's sequence number in its incarnation, from 1
	ID      string        // the event ID (resume token _data)
	Lane    int           // the lane that runs the event, from 0
	Attempt int           // the attempt that failed (1-based)
	Delay   time.Duration // the backoff before the next attempt (RetryPolicy, jittered)
	Err     error         // the attempt's error
}

// DeadLettered reports an event whose attempts ran out or whose error was permanent.
type DeadLettered struct {
	Seq uint64 // the event's sequence number in its incarnation, from 1
	ID  string // the event ID (resume token _data)
	// OperationType is the event's operationType ("insert", "update", ...), empty if unreadable.
	OperationType string
	Lane          int // the lane that ran the event, from 0
	// Attempts is the number of handler calls made (0 for an event that did not decode).
	Attempts int
	Err      error
	// Permanent is set when the error skipped the remaining attempts (permanent or decode error).
	Permanent bool
	// Dropped is set when dead letters are disabled: no record was written.
	Dropped bool
}

// DeadLetterFailed reports a failed dead-letter write.
type DeadLetterFailed struct {
	Seq   uint64        // the event's sequence number in its incarnation, from 1
	ID    string        // the event ID (resume token _data)
	Lane  int           // the lane that holds the event, from 0
	Write int           // the failed write's number, from 1
	Delay time.Duration // the backoff before the next write (the RetryPolicy formula; never stops)
	Err   error         // the store's error
}

// EventSkipped reports an event settled on purpose by the handler.
type EventSkipped struct {
	Seq    uint64 // the event's sequence number in its incarnation, from 1
	ID     string // the event ID (resume token _data)
	Lane   int    // the lane that ran the event, from 0
	Reason string // the text of the Skip error
}

// HandlerPanicked reports a recovered panic of the Router or the handler.
type HandlerPanicked struct {
	Seq     uint64 // the event's sequence number in its incarnation, from 1
	ID      string // the event ID (resume token _data)
	Lane    int    // the lane that ran the event, from 0
	Attempt int    // the attempt that panicked (1-based)
	Value   any    // the value passed to panic
	Stack   []byte // the goroutine's stack at the panic
}

// Counts are cumulative outcome counters of one dispatcher instance.
type Counts struct {
	Settled      uint64 // every settled event: the sum of the five outcomes below
	Handled      uint64 // a handler returned nil
	Filtered     uint64 // Stream.Filter rejected the event
	Unhandled    uint64 // no handler for the event's operation type
	Skipped      uint64 // a handler returned watchtree.Skip
	DeadLettered uint64 // attempts ran out or the error was permanent; the record is written (or Dropped)
	Dropped      uint64 // of DeadLettered: dead letters disabled, no record written
}

// NopEvents ignores every report.
type NopEvents struct{}

// RetryScheduled ignores the report.
func (NopEvents) RetryScheduled(RetryScheduled) {}

// DeadLettered ignores the report.
func (NopEvents) DeadLettered(DeadLettered) {}

// DeadLetterFailed ignores the report.
func (NopEvents) DeadLetterFailed(DeadLetterFailed) {}

// Skipped ignores the report.
func (NopEvents) Skipped(EventSkipped) {}

// HandlerPanicked ignores the report.
func (NopEvents) HandlerPanicked(HandlerPanicked) {}

// Counted ignores the report.
func (NopEvents) Counted(Counts) {}

// emit calls f, recovering and logging a panic of the Events implementation.
func emit(log *zap.Logger, name string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("dispatcher Events callback panicked", zap.String("callback", name), zap.Any("panic", r))
		}
	}()
	f()
}
