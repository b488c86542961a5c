// Package leasewatch multiplexes the lease watches of one lease store over one feed (a change
// stream, a pub/sub subscription), so that a runtime holds one connection for all its
// SingleLeader streams' watches instead of one per stream. It is how a store.LeaseStore
// implements WatchLease: store/mongostore feeds it from a change stream of its lease
// collection, store/redisstore from a pattern subscription, and a store of another database
// can do the same. The store owns the Hub; its WatchLease calls Watch with the store's Feed,
// and the Feed calls Notify for each lease it sees change.
package leasewatch

import (
	"context"
	"sync"
	"time"
)

// retryDelay is the wait before a Feed that ended (its connection failed) runs again.
const retryDelay = time.Second

// Feed reads one connection of a store's change feed (a change stream, a subscription) until it
// fails or ctx ends, calling Hub.Notify for each changed lease. It calls opened once the
// connection is up: after a reconnection the hub then wakes every watch, since the changes made
// while the feed was down are unknown.
type Feed func(ctx context.Context, opened func())

// Hub is the watches of one store. The zero value is ready. The feed runs while at least one
// watch is open: the first Watch starts it (and runs it again 1s after each failure),
// the end of the last watch cancels it.
type Hub struct {
	mu     sync.Mutex
	subs   map[string]map[*watch]struct{} // lease name → its open watches (no empty sets)
	cancel context.CancelFunc             // of the running feed; nil when none runs
}

type watch struct{ ch chan struct{} }

// Watch opens a watch of name: the channel receives a value (changes coalesce: it holds one)
// after each change Notify reports, and is closed when ctx ends. feed is started, on a
// goroutine of its own, when no feed runs.
func (h *Hub) Watch(ctx context.Context, name string, feed Feed) <-chan struct{} {
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
	if h.cancel == nil {
		fctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		go h.run(fctx, feed)
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
	if len(h.subs) == 0 && h.cancel != nil {
		h.cancel()
		h.cancel = nil
	}
}

// run runs feed until ctx ends, again retryDelay after each end.
func (h *Hub) run(ctx context.Context, feed Feed) {
	for first := true; ctx.Err() == nil; first = false {
		feed(ctx, func() {
			if !first {
				h.notifyAll()
			}
		})
		select {
		case <-ctx.Done():
		case <-time.After(retryDelay):
		}
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

// notifyAll wakes every watch (after a reconnection: what changed while the feed was down is unknown).
func (h *Hub) notifyAll() {
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
