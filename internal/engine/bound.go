package engine

import (
	"context"
	"sync"
	"time"
)

// cursorBound is the context of one cursor's waits for the server (its open, then each of its
// getMores): the reader's context with a deadline armed anew for each wait, the timer Reset for
// each and the parent's end followed once (context.AfterFunc). A context.WithTimeout per
// getMore made a timer, a context and a Done channel for every getMore (one a second per idle
// stream); this holds about as much, once per cursor, and a getMore allocates nothing for it.
//
// The driver reads Deadline for the socket deadlines and the getMore's maxTimeMS (and retries a
// resume until it), and Done and Err to abort a wait when the context is cancelled, all within
// the call given the context: arm before the call, disarm after it. Only the cursor's goroutine
// arms, disarms and releases it.
type cursorBound struct {
	parent     context.Context
	parentDone <-chan struct{} // parent.Done(): a TryNext with another context is bounded apart
	parentEnd  time.Time       // parent's deadline, if it has one: a wait never ends later
	hasEnd     bool
	stopParent func() bool // ends the following of parent's end
	timer      *time.Timer // fires at the deadline; made by the first arm, then Reset

	mu       sync.Mutex
	deadline time.Time
	done     chan struct{} // closed once err is set; a fresh one when a fired bound is armed again
	err      error
}

func newCursorBound(parent context.Context) *cursorBound {
	b := &cursorBound{parent: parent, parentDone: parent.Done(), done: make(chan struct{})}
	b.parentEnd, b.hasEnd = parent.Deadline()
	b.stopParent = context.AfterFunc(parent, b.parentEnded)
	return b
}

// arm starts a wait of at most d (or until the parent ends).
func (b *cursorBound) arm(d time.Duration) {
	deadline := time.Now().Add(d) // before the timer's start: it never fires before the deadline
	if b.hasEnd && b.parentEnd.Before(deadline) {
		deadline = b.parentEnd // the parent's own end (its AfterFunc) ends the wait then
	}
	b.mu.Lock()
	b.deadline = deadline
	if b.err != nil {
		if err := b.parent.Err(); err != nil {
			// The parent ended (its AfterFunc ran already, or found the bound fired): stay done,
			// with the parent's error, so the driver gives up at once.
			b.err = err
			b.mu.Unlock()
			return
		}
		// The last wait ran out: this one needs a channel not closed yet.
		b.done, b.err = make(chan struct{}), nil
	}
	b.mu.Unlock()
	if b.timer == nil {
		b.timer = time.AfterFunc(d, b.expire)
	} else {
		b.timer.Reset(d)
	}
}

// disarm ends the wait: the timer stops (a callback already running finds the bound disarmed or
// re-armed with a later deadline, and does nothing).
func (b *cursorBound) disarm() {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Lock()
	b.deadline = time.Time{}
	b.mu.Unlock()
}

// release ends the bound with its cursor: the timer stops and the parent no longer refers to it.
func (b *cursorBound) release() {
	b.stopParent()
	b.disarm()
}

// expire is the timer's callback: the armed wait ran out, unless it was disarmed or re-armed
// with a later deadline since the timer fired.
func (b *cursorBound) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil && !b.deadline.IsZero() && !time.Now().Before(b.deadline) {
		b.err = context.DeadlineExceeded
		close(b.done)
	}
}

// parentEnded is the parent's AfterFunc.
func (b *cursorBound) parentEnded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = b.parent.Err()
		close(b.done)
	}
}

// Deadline is the armed wait's deadline. The bound is given to the driver only while armed;
// disarmed it has none (the driver keeps the open's context for reconnecting its deployment,
// and uses it only inside a later, armed, wait).
func (b *cursorBound) Deadline() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deadline, !b.deadline.IsZero()
}

// Done is closed when the armed wait runs out or the parent ends.
func (b *cursorBound) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// Err is context.DeadlineExceeded once the armed wait ran out, the parent's error once it ended.
func (b *cursorBound) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Value is the parent's.
func (b *cursorBound) Value(key any) any { return b.parent.Value(key) }

func (b *cursorBound) String() string { return "watchtree.cursorBound" }
