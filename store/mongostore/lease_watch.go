package mongostore

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// leaseWatcher multiplexes the WatchLease calls of one Store over one change stream on the
// lease collection. It runs while at least one watch is open: the first watch starts its
// goroutine, the last one to end cancels it. Each change is sent to the watches of its record's
// _id, without blocking (a watch's channel holds one pending value; further changes coalesce).
type leaseWatcher struct {
	mu     sync.Mutex
	subs   map[string]map[*leaseSub]struct{} // lease name → its open watches
	n      int                               // open watches
	cancel context.CancelFunc                // of the running goroutine; nil when none runs
}

type leaseSub struct{ ch chan struct{} }

// watch opens one watch of name, closed when ctx ends.
func (w *leaseWatcher) watch(ctx context.Context, coll *mongo.Collection, name string) <-chan struct{} {
	sub := &leaseSub{ch: make(chan struct{}, 1)}
	w.mu.Lock()
	if ctx.Err() != nil {
		w.mu.Unlock()
		close(sub.ch)
		return sub.ch
	}
	if w.subs == nil {
		w.subs = map[string]map[*leaseSub]struct{}{}
	}
	if w.subs[name] == nil {
		w.subs[name] = map[*leaseSub]struct{}{}
	}
	w.subs[name][sub] = struct{}{}
	w.n++
	if w.cancel == nil {
		rctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go w.run(rctx, coll)
	}
	w.mu.Unlock()
	context.AfterFunc(ctx, func() { w.unwatch(name, sub) })
	return sub.ch
}

// unwatch ends one watch; the last one stops the change stream.
func (w *leaseWatcher) unwatch(name string, sub *leaseSub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.subs[name], sub)
	if len(w.subs[name]) == 0 {
		delete(w.subs, name)
	}
	close(sub.ch) // under mu: notify never sends on a closed channel
	w.n--
	if w.n == 0 && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// notify wakes the watches of name.
func (w *leaseWatcher) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for sub := range w.subs[name] {
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
}

// notifyAll wakes every watch: after the change stream (re)opens, changes made while it was
// down are unknown, so every caller reads its lease again.
func (w *leaseWatcher) notifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, subs := range w.subs {
		for sub := range subs {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
	}
}

// run reads the lease collection's change stream until ctx ends, reopening it a second after
// a failure. Only the document key travels (the record itself is read by the caller).
func (w *leaseWatcher) run(ctx context.Context, coll *mongo.Collection) {
	pipeline := mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "documentKey", Value: 1}}}}}
	for reopened := false; ctx.Err() == nil; reopened = true {
		cs, err := coll.Watch(ctx, pipeline, options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err == nil {
			if reopened {
				w.notifyAll()
			}
			for cs.Next(ctx) {
				if name, ok := cs.Current.Lookup("documentKey", "_id").StringValueOK(); ok {
					w.notify(name)
				}
			}
			// Bounded: killCursors on a dead server would otherwise wait for server selection.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = cs.Close(cctx)
			cancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
