// Package leasewatch multiplexes the lease watches of one lease store over one feed (a change
// stream, a pub/sub subscription), so that a runtime holds one connection for all its
// SINGLE_LEADER streams' watches instead of one per stream.
package leasewatch

import (
	"context"
	"sync"
)

// Hub is the watches of one store. The zero value is ready. The feed runs while at least one
// watch is open: the first Watch starts it, the end of the last one cancels its context. The
// feed calls Notify for each changed lease and NotifyAll after it (re)connected, since changes
// made while it was down are unknown.
type Hub struct {
	mu     sync.Mutex
	subs   map[string]map[*watch]struct{} // lease name → its open watches
	open   int                            // open watches
	cancel context.CancelFunc             // of the running feed; nil when none runs
}

type watch struct{ ch chan struct{} }

// Watch opens a watch of name: the channel receives a value (changes coalesce: it holds one)
// after each change Notify reports, and is closed when ctx ends. feed is started, on a
// goroutine of its own, when no feed runs; it must return once its context ends.
func (h *Hub) Watch(ctx context.Context, name string, feed func(context.Context)) <-chan struct{} {
	w := &watch{ch: make(chan struct{}, 1)}
	h.mu.Lock()
	if ctx.Err() != nil {
		h.mu.Unlock()
		close(w.ch)
		return w.ch
	}
	if h.subs == nil {
		h.subs = map[string]map[*watch]struct{}{}
	}
	if h.subs[name] == nil {
		h.subs[name] = map[*watch]struct{}{}
	}
	h.subs[name][w] = struct{}{}
	h.open++
	if h.cancel == nil {
		fctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		go feed(fctx)
	}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() { h.end(name, w) })
	return w.ch
}

// end closes one watch; the last one stops the feed.
func (h *Hub) end(name string, w *watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[name], w)
	if len(h.subs[name]) == 0 {
		delete(h.subs, name)
	}
	close(w.ch) // under mu: Notify never sends on a closed channel
	h.open--
	if h.open == 0 && h.cancel != nil {
		h.cancel()
		h.cancel = nil
	}
}

// Notify wakes the watches of name, without blocking.
func (h *Hub) Notify(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[name] {
		wake(w)
	}
}

// NotifyAll wakes every watch.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.subs {
		for w := range ws {
			wake(w)
		}
	}
}

func wake(w *watch) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
