package watchtree

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
)

// Observer receives the runtime's typed events: lifecycle, retries, dead letters, checkpoints,
// history loss, gaps, invalidation and leadership. Metrics adapters (Prometheus), audit logs and
// tests implement it.
//
// Observer has one method taking a sealed ObserverEvent rather than one method per kind: adding
// an event kind in a later version does not break existing implementations, an implementation
// handles only the kinds it cares about with a type switch, and MultiObserver and the internal
// queue stay one-liners. The event set is closed (the interface has an unexported method), so a
// switch can list every kind.
//
// The runtime never calls an Observer on its own goroutines: events go through a bounded
// queue drained by one goroutine, so OnEvent is never called concurrently with itself, a slow
// Observer delays only other observer events, and when the queue (1024 events) is full events
// are dropped and counted rather than blocking a stream. A panic in OnEvent is recovered,
// counted and logged. Runtime.ObserverStats returns the counts.
type Observer interface {
	OnEvent(ev ObserverEvent)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ev ObserverEvent)

// OnEvent calls f(ev).
func (f ObserverFunc) OnEvent(ev ObserverEvent) { f(ev) }

// NopObserver ignores every event. It is the default Config.Observer.
type NopObserver struct{}

// OnEvent does nothing.
func (NopObserver) OnEvent(ObserverEvent) {}

// MultiObserver returns an Observer that passes every event to each of obs in order, skipping
// nil ones. A panic in one observer does not keep the others from seeing the event: it is
// re-raised after all have been called (and then recovered and counted by the runtime).
func MultiObserver(obs ...Observer) Observer {
	out := make(multiObserver, 0, len(obs))
	for _, o := range obs {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

type multiObserver []Observer

func (m multiObserver) OnEvent(ev ObserverEvent) {
	var first any
	for _, o := range m {
		func() {
			defer func() {
				if p := recover(); p != nil && first == nil {
					first = p
				}
			}()
			o.OnEvent(ev)
		}()
	}
	if first != nil {
		panic(first)
	}
}

// ObserverEvent is one of the event structs of this package: Started, Stopped, Restarted,
// RetryScheduled, Skipped, DeadLettered, DeadLetterFailed, Checkpointed, CheckpointFailed,
// HistoryLost, GapRecorded, Invalidated and LeadershipChanged. Every event carries the stream
// name and the time it happened.
type ObserverEvent interface {
	// StreamName returns the name of the stream the event is about.
	StreamName() string
	// String returns a one-line description for logs.
	String() string
	observerEvent()
}

// Meta is the part every ObserverEvent shares.
type Meta struct {
	// Stream is the stream's Name.
	Stream string
	// Time is when the event happened.
	Time time.Time
}

// StreamName returns m.Stream.
func (m Meta) StreamName() string { return m.Stream }

// StopReason tells a graceful stop from a crash.
type StopReason int

const (
	// Graceful: stopped by Stop (runtime or handle), after draining and flushing.
	Graceful StopReason = iota
	// Crashed: the stream died (cursor error, history lost, invalidated, gave up, ...). The
	// supervisor's RestartPolicy decides whether it comes back.
	Crashed
)

// String returns "graceful" or "crashed".
func (r StopReason) String() string {
	switch r {
	case Graceful:
		return "graceful"
	case Crashed:
		return "crashed"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// Started reports that the stream's cursor is open and events flow.
type Started struct {
	Meta
	// Position says where it started: "checkpoint", "initial", "latest", "at", "after-invalidate",
	// "after-gap", or "migrated" (an AllInstances instance's first start from the stream's
	// shared checkpoint of an earlier version). An Ephemeral stream starts "latest".
	Position string
}

// Stopped reports that the stream stopped, gracefully or by a crash.
type Stopped struct {
	Meta
	Reason StopReason
	// Cause is nil for a graceful stop; for a crash it is the error, matching ErrGaveUp,
	// ErrHistoryLost, ErrInvalidated or ErrFenced with errors.Is when terminal, or carrying the
	// server's error (a mongo.ServerError) when the server refused what no restart can fix.
	Cause error
	// Terminal is true when the stream stays down until an operator starts it.
	Terminal bool
	// Attempt and RestartIn describe the supervisor's backoff after a crash that is not
	// terminal: the stream's RestartPolicy schedules restart attempt Attempt (1-based, counted
	// since the last successful start) RestartIn from Time. Both are zero for a graceful or a
	// terminal stop. A Restarted event follows when the attempt succeeds; a failed attempt is
	// reported as another Stopped with the next Attempt and its longer delay.
	Attempt   int
	RestartIn time.Duration
}

// Restarted reports a successful restart by the supervisor after a crash.
type Restarted struct {
	Meta
	// Attempt is the 1-based restart attempt that succeeded.
	Attempt int
	// Cause is the error of the crash that led to the restart.
	Cause error
}

// RetryScheduled reports that a handler failed and the event will be retried.
type RetryScheduled struct {
	Meta
	// EventID is the event's ID().
	EventID string
	// Attempt is the 1-based attempt that failed.
	Attempt int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Err is the handler's error.
	Err error
}

// Skipped reports an event settled on purpose because its handler returned Skip(reason).
type Skipped struct {
	Meta
	EventID string
	Reason  string
}

// DeadLettered reports an event that exhausted its attempts or failed permanently, and whose
// dead-letter record is durably written (or dropped, when dead letters are disabled).
type DeadLettered struct {
	Meta
	EventID       string
	OperationType OperationType
	// Attempts is the number of handler calls made (0 for a decode error).
	Attempts int
	// Err is the final error.
	Err error
	// Dropped is true when DeadLetter.Disabled: nothing was written and the event is lost.
	Dropped bool
}

// DeadLetterFailed reports a failed dead-letter write. The event stays unsettled and the write
// is retried; the checkpoint does not pass it.
type DeadLetterFailed struct {
	Meta
	EventID string
	Err     error
}

// Checkpointed reports a durable checkpoint write.
type Checkpointed struct {
	Meta
	// Token is the resume token written.
	Token bson.Raw
	// Settled is the number of settlements this write covers (0 for an idle-token write).
	Settled int
}

// CheckpointFailed reports a failed checkpoint write. The progress stays due and is retried;
// processing goes on up to CheckpointPolicy.MaxUnflushed unwritten settlements.
type CheckpointFailed struct {
	Meta
	Err error
	// Unflushed is the number of settled events not yet written.
	Unflushed int
}

// HistoryLost reports that the saved position is no longer in the oplog, and which
// OnHistoryLost policy applies.
type HistoryLost struct {
	Meta
	Policy HistoryLostPolicy
	Err    error
}

// GapRecorded reports a durable gap record: events between From and To were never delivered.
type GapRecorded struct {
	Meta
	// From is the last position known good (the lost token); To is the new start position.
	From, To bson.Raw
	Policy   HistoryLostPolicy
}

// Invalidated reports an invalidate event and the path taken.
type Invalidated struct {
	Meta
	// Cause is the operation that invalidated the stream: drop, rename or dropDatabase (empty
	// when the server sent the invalidate alone).
	Cause  OperationType
	Action InvalidatePolicy
}

// LeadershipChanged reports a change of a SingleLeader stream's leadership on this instance:
// acquired, lost, released, handed over for balance, or fenced (Change).
type LeadershipChanged struct {
	Meta
	// Leader is true when this instance now leads the stream (Change LeadershipAcquired).
	Leader bool
	// Change says what happened.
	Change LeadershipChange
	// Instance is this instance's ID (Config.InstanceID).
	Instance string
	// Owner is the instance ID holding the lease as last seen (empty when unknown or free).
	Owner string
	// Epoch is the lease epoch concerned; it increments on every acquisition.
	Epoch int64
	// ExpiresAt is the lease's expiry (lease store clock) when known.
	ExpiresAt time.Time
	// Why is the reason of a loss or a fencing.
	Why string
}

// SnapshotStarted reports that a new snapshot planned its ranges and reads its first documents.
type SnapshotStarted struct {
	Meta
	Snapshot SnapshotStatus
}

// SnapshotResumed reports that a run continues a snapshot an earlier run had begun (after a
// restart or a crash): finished ranges are not read again, the others resume after their last
// document done.
type SnapshotResumed struct {
	Meta
	Snapshot SnapshotStatus
}

// SnapshotProgress reports a running snapshot's progress, every second, and at once when its
// handoff position becomes at risk of leaving the oplog before it ends (Snapshot.AtRisk).
type SnapshotProgress struct {
	Meta
	Snapshot SnapshotStatus
}

// SnapshotDone reports that every range of the snapshot is done; the change stream opens from
// the snapshot's handoff position next.
type SnapshotDone struct {
	Meta
	Snapshot SnapshotStatus
}

// The sealing methods: only the types below are ObserverEvents (embedding Meta is not enough).
func (Started) observerEvent()           {}
func (Stopped) observerEvent()           {}
func (Restarted) observerEvent()         {}
func (RetryScheduled) observerEvent()    {}
func (Skipped) observerEvent()           {}
func (DeadLettered) observerEvent()      {}
func (DeadLetterFailed) observerEvent()  {}
func (Checkpointed) observerEvent()      {}
func (CheckpointFailed) observerEvent()  {}
func (HistoryLost) observerEvent()       {}
func (GapRecorded) observerEvent()       {}
func (Invalidated) observerEvent()       {}
func (LeadershipChanged) observerEvent() {}
func (SnapshotStarted) observerEvent()   {}
func (SnapshotResumed) observerEvent()   {}
func (SnapshotProgress) observerEvent()  {}
func (SnapshotDone) observerEvent()      {}

func (e SnapshotStarted) String() string {
	return fmt.Sprintf("stream %s snapshot %s started (%s, %d ranges, ~%d documents)", e.Stream, e.Snapshot.ID,
		e.Snapshot.Reason, e.Snapshot.RangesTotal, e.Snapshot.EstimatedTotal)
}

func (e SnapshotResumed) String() string {
	return fmt.Sprintf("stream %s snapshot %s resumed (%d/%d ranges done, %d documents)", e.Stream, e.Snapshot.ID,
		e.Snapshot.RangesDone, e.Snapshot.RangesTotal, e.Snapshot.Documents)
}

func (e SnapshotProgress) String() string {
	s := fmt.Sprintf("stream %s snapshot %s: %d/%d ranges, %d documents, %.0f/s, ETA %v", e.Stream, e.Snapshot.ID,
		e.Snapshot.RangesDone, e.Snapshot.RangesTotal, e.Snapshot.Documents, e.Snapshot.Rate, e.Snapshot.ETA)
	if e.Snapshot.AtRisk {
		s += ": " + e.Snapshot.Warning
	}
	return s
}

func (e SnapshotDone) String() string {
	return fmt.Sprintf("stream %s snapshot %s done (%d documents, %d dead-lettered)", e.Stream, e.Snapshot.ID,
		e.Snapshot.Documents, e.Snapshot.DeadLettered)
}

func (e Started) String() string {
	return fmt.Sprintf("stream %s started from %s", e.Stream, e.Position)
}

func (e Stopped) String() string {
	s := fmt.Sprintf("stream %s stopped (%s)", e.Stream, e.Reason)
	if e.Terminal {
		s += ", terminal"
	}
	if e.Attempt > 0 {
		s += fmt.Sprintf(", restart attempt %d in %v", e.Attempt, e.RestartIn)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e Restarted) String() string {
	return fmt.Sprintf("stream %s restarted (attempt %d) after: %v", e.Stream, e.Attempt, e.Cause)
}

func (e RetryScheduled) String() string {
	return fmt.Sprintf("stream %s: event %s attempt %d failed, retry in %v: %v", e.Stream, e.EventID, e.Attempt, e.Delay, e.Err)
}

func (e Skipped) String() string {
	return fmt.Sprintf("stream %s: event %s skipped: %s", e.Stream, e.EventID, e.Reason)
}

func (e DeadLettered) String() string {
	verb := "dead-lettered"
	if e.Dropped {
		verb = "dropped (dead letters disabled)"
	}
	return fmt.Sprintf("stream %s: %s event %s %s after %d attempts: %v", e.Stream, e.OperationType, e.EventID, verb, e.Attempts, e.Err)
}

func (e DeadLetterFailed) String() string {
	return fmt.Sprintf("stream %s: dead-letter write for event %s failed, will retry: %v", e.Stream, e.EventID, e.Err)
}

func (e Checkpointed) String() string {
	return fmt.Sprintf("stream %s: checkpoint written (%d settled)", e.Stream, e.Settled)
}

func (e CheckpointFailed) String() string {
	return fmt.Sprintf("stream %s: checkpoint write failed (%d unflushed), will retry: %v", e.Stream, e.Unflushed, e.Err)
}

func (e HistoryLost) String() string {
	return fmt.Sprintf("stream %s: change stream history lost, applying %v: %v", e.Stream, e.Policy, e.Err)
}

func (e GapRecorded) String() string {
	return fmt.Sprintf("stream %s: gap recorded (%v)", e.Stream, e.Policy)
}

func (e Invalidated) String() string {
	return fmt.Sprintf("stream %s invalidated by %q, %v", e.Stream, e.Cause, e.Action)
}

func (e LeadershipChanged) String() string {
	if e.Leader {
		return fmt.Sprintf("stream %s: leader (epoch %d)", e.Stream, e.Epoch)
	}
	if e.Change != "" && e.Change != LeadershipAcquired {
		s := fmt.Sprintf("stream %s: leadership %s (epoch %d)", e.Stream, e.Change, e.Epoch)
		if e.Why != "" {
			s += ": " + e.Why
		}
		return s
	}
	return fmt.Sprintf("stream %s: not leader (owner %q, epoch %d)", e.Stream, e.Owner, e.Epoch)
}

// ObserverStats counts what became of the events meant for Config.Observer since Start.
// Delivered + Dropped + Panicked is the number of events the runtime emitted, less those still
// queued.
type ObserverStats struct {
	// Delivered counts the events whose OnEvent call returned normally.
	Delivered uint64
	// Dropped counts the events the Observer never received: the queue (1024 events) was full
	// because OnEvent was slower than the events came, or they were still queued when Stop's
	// deadline passed. A growing Dropped means the Observer is too slow: its metrics or audit
	// trail miss events.
	Dropped uint64
	// Panicked counts the OnEvent calls that panicked (recovered and logged).
	Panicked uint64
}

// ObserverStats returns the counts of the runtime's Observer events: all zero before Start,
// and final after Stop. It is cheap (three atomic loads) and safe to call at any time, e.g.
// from a metrics scrape.
func (rt *Runtime) ObserverStats() ObserverStats {
	rt.mu.Lock()
	obs := rt.obs
	rt.mu.Unlock()
	if obs == nil {
		return ObserverStats{}
	}
	return ObserverStats{Delivered: obs.Delivered(), Dropped: obs.Dropped(), Panicked: obs.Panics()}
}

// defaultObserverQueue is the capacity of the safeObserver queue.
const defaultObserverQueue = 1024

// safeObserver shields the runtime from its Observer. OnEvent never blocks: events go to a
// bounded queue drained by one goroutine, and are dropped (and counted) when the queue is full
// or the observer is closed. Panics of the wrapped observer are recovered, counted and logged.
type safeObserver struct {
	next   Observer
	logger *zap.Logger

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	queue  chan ObserverEvent
	done   chan struct{} // closed when the drain goroutine exits
	abort  chan struct{} // closed by Close when its ctx expires: discard the rest

	delivered  atomic.Uint64
	dropped    atomic.Uint64
	panics     atomic.Uint64
	delivering atomic.Bool // an OnEvent call is running
}

// newSafeObserver starts the drain goroutine; Close stops it. capacity <= 0 means the default
// 1024; a nil logger means zap.NewNop.
func newSafeObserver(next Observer, capacity int, logger *zap.Logger) *safeObserver {
	if capacity <= 0 {
		capacity = defaultObserverQueue
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if next == nil {
		next = NopObserver{}
	}
	s := &safeObserver{
		next:   next,
		logger: logger,
		queue:  make(chan ObserverEvent, capacity),
		done:   make(chan struct{}),
		abort:  make(chan struct{}),
	}
	go s.drain()
	return s
}

// OnEvent enqueues ev without blocking; it drops ev when the queue is full or s is closed.
func (s *safeObserver) OnEvent(ev ObserverEvent) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.drop(ev, "closed")
		return
	}
	select {
	case s.queue <- ev:
	default:
		s.drop(ev, "queue full")
	}
}

func (s *safeObserver) drop(ev ObserverEvent, why string) {
	n := s.dropped.Add(1)
	if n == 1 || n%1024 == 0 { // log the first drop, then every 1024th, not every one
		s.logger.Warn("observer event dropped", zap.String("stream", ev.StreamName()),
			zap.String("why", why), zap.Uint64("dropped_total", n))
	}
}

func (s *safeObserver) drain() {
	defer close(s.done)
	for ev := range s.queue {
		select {
		case <-s.abort:
			s.dropped.Add(1)
			continue
		default:
		}
		s.delivering.Store(true)
		s.deliver(ev)
		s.delivering.Store(false)
	}
}

func (s *safeObserver) deliver(ev ObserverEvent) {
	defer func() {
		if p := recover(); p != nil {
			n := s.panics.Add(1)
			s.logger.Error("observer panicked", zap.String("stream", ev.StreamName()),
				zap.String("event", fmt.Sprintf("%T", ev)), zap.Any("panic", p),
				zap.Uint64("panics_total", n), zap.StackSkip("stack", 2))
			return
		}
		s.delivered.Add(1)
	}()
	s.next.OnEvent(ev)
}

// Close stops accepting events and waits until the queued ones are delivered. If ctx expires
// first, the events still queued are discarded (counted as dropped), Close returns an
// *observerDrainError (matching ErrObserverNotDrained and ctx.Err()) that counts them, and the
// goroutine exits as soon as the observer call in progress returns. Close is idempotent.
func (s *safeObserver) Close(ctx context.Context) error { return s.closeFrom(ctx, time.Now()) }

// closeFrom is Close, reporting the time since since in its error: Stop passes its own start,
// because the Observer drains all along the stop.
func (s *safeObserver) closeFrom(ctx context.Context, since time.Time) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		pending := len(s.queue)
		if s.delivering.Load() {
			pending++
		}
		s.abortOnce()
		return &observerDrainError{pending: pending, within: time.Since(since), err: ctx.Err()}
	}
}

// observerDrainError reports that the Observer had not received every event when Close's
// context ended.
type observerDrainError struct {
	pending int // events queued or being delivered
	within  time.Duration
	err     error // ctx.Err()
}

func (e *observerDrainError) Error() string {
	return fmt.Sprintf("observer did not drain %d queued events within %v: %v", e.pending,
		e.within.Round(time.Millisecond), e.err)
}

func (e *observerDrainError) Unwrap() []error { return []error{ErrObserverNotDrained, e.err} }

func (s *safeObserver) abortOnce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.abort:
	default:
		close(s.abort)
	}
}

// Dropped returns the number of events dropped so far.
func (s *safeObserver) Dropped() uint64 { return s.dropped.Load() }

// Panics returns the number of observer panics recovered so far.
func (s *safeObserver) Panics() uint64 { return s.panics.Load() }

// Delivered returns the number of events the observer returned from normally.
func (s *safeObserver) Delivered() uint64 { return s.delivered.Load() }
