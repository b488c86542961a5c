package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/observe"
)

// The events of Config.Observer are defined in package observe, where the actors build them;
// safeObserver is their one delivery path: a bounded queue and one goroutine between the actors
// and the user's Observer.

// defaultObserverQueue is the capacity of the safeObserver queue.
const defaultObserverQueue = 1024

// safeObserver shields the runtime from its Observer. OnEvent never blocks: events go to a
// bounded queue drained by one goroutine, and are dropped (and counted) when the queue is full
// or the observer is closed. Panics of the wrapped observer are recovered, counted and logged.
type safeObserver struct {
	next   observe.Observer
	logger *zap.Logger

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	queue  chan observe.Event
	done   chan struct{} // closed when the drain goroutine exits
	abort  chan struct{} // closed by Close when its ctx expires: discard the rest

	delivered  atomic.Uint64
	dropped    atomic.Uint64
	panics     atomic.Uint64
	delivering atomic.Bool // an OnEvent call is running
}

// newSafeObserver starts the drain goroutine; Close stops it. capacity <= 0 means the default
// 1024; a nil logger means zap.NewNop.
func newSafeObserver(next observe.Observer, capacity int, logger *zap.Logger) *safeObserver {
	if capacity <= 0 {
		capacity = defaultObserverQueue
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if next == nil {
		next = observe.Nop{}
	}
	s := &safeObserver{
		next:   next,
		logger: logger,
		queue:  make(chan observe.Event, capacity),
		done:   make(chan struct{}),
		abort:  make(chan struct{}),
	}
	go s.drain()
	return s
}

// OnEvent enqueues ev without blocking; it drops ev when the queue is full or s is closed.
func (s *safeObserver) OnEvent(ev observe.Event) {
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

func (s *safeObserver) drop(ev observe.Event, why string) {
	n := s.dropped.Add(1)
	if n == 1 || n%1024 == 0 { // log the first drop, then every 1024th, not every one
		s.logger.Warn("observer event dropped", zap.String("stream", ev.EventMeta().Stream),
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

func (s *safeObserver) deliver(ev observe.Event) {
	defer func() {
		if p := recover(); p != nil {
			n := s.panics.Add(1)
			s.logger.Error("observer panicked", zap.String("stream", ev.EventMeta().Stream),
				zap.Stringer("event", ev.Kind()), zap.Any("panic", p),
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
