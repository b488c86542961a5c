package engine

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/store/mongostore"
)

// indexTimeout bounds one store's index creation in the background.
const indexTimeout = 10 * time.Second

// indexer creates the indexes of the default stores on one goroutine, so that registering a
// stream never waits on the server. The runtime owns it: the first request starts the
// goroutine, and stop (called by Runtime.Stop) cancels the creation in flight and waits for the
// goroutine to end. A failure is logged and forgotten; the next request for the same store
// (the next Spawn that uses it) tries again. The zero value is ready to use.
type indexer struct {
	mu      sync.Mutex
	queue   []indexJob
	queued  map[indexKey]bool // in queue or in flight
	started bool
	stopped bool
	ctx     context.Context // cancelled by stop
	cancel  context.CancelFunc
	wake    chan struct{} // a job was queued (capacity 1)
	done    chan struct{} // closed when the goroutine ends
}

type indexJob struct {
	key indexKey
	st  *mongostore.Store
	log *zap.Logger
}

// enqueue asks for the indexes of st (key) without waiting. It does nothing after stop, and
// for a store already queued or in flight.
func (ix *indexer) enqueue(j indexJob) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.stopped || ix.queued[j.key] {
		return
	}
	if !ix.started {
		ix.started = true
		ix.queued = map[indexKey]bool{}
		ix.ctx, ix.cancel = context.WithCancel(context.Background())
		ix.wake = make(chan struct{}, 1)
		ix.done = make(chan struct{})
		go ix.run(ix.ctx)
	}
	ix.queued[j.key] = true
	ix.queue = append(ix.queue, j)
	select {
	case ix.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// run creates the queued indexes one store at a time until stop.
func (ix *indexer) run(ctx context.Context) {
	defer close(ix.done)
	for {
		ix.mu.Lock()
		if len(ix.queue) == 0 {
			ix.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ix.wake:
				continue
			}
		}
		j := ix.queue[0]
		ix.queue = ix.queue[1:]
		ix.mu.Unlock()

		createIndexes(ctx, j)

		ix.mu.Lock()
		delete(ix.queued, j.key)
		ix.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// createIndexes creates j's indexes, bounded by indexTimeout, and remembers success.
func createIndexes(ctx context.Context, j indexJob) {
	if _, ok := indexedByRuntime.Load(j.key); ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, indexTimeout)
	defer cancel()
	if err := j.st.EnsureIndexes(ctx); err != nil {
		j.log.Warn("store indexes not created; dead-letter retention and listing may be slow until they are (retried by the next Spawn that uses the store)",
			zap.String("database", j.key.k.database), zap.String("dead_letters", j.key.k.deadLetters), zap.Error(err))
		return
	}
	indexedByRuntime.Store(j.key, true)
}

// stop cancels the creation in flight, drops the queue and waits for the goroutine to end.
// Later requests are ignored. It is idempotent.
func (ix *indexer) stop() {
	ix.mu.Lock()
	ix.stopped = true
	ix.queue = nil
	started := ix.started
	ix.mu.Unlock()
	if !started {
		return
	}
	ix.cancel()
	<-ix.done
}
