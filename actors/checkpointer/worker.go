package checkpointer

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/store"
)

// job is one piece of blocking work: store I/O, a position capture, a rebuild. It runs on the
// worker goroutine and returns the result message to send to the actor (nil for none).
type job func(ctx context.Context) any

// worker is where a checkpointer instance performs blocking I/O: one goroutine at a time, which
// exists only while jobs are queued. Jobs run one at a time, in submission order; their results
// are sent to the actor as messages. The actor keeps at most one checkpoint save queued or
// running (it submits the next one, with the latest position, when the result of the previous
// one arrives), so the queue never holds a stale save. submit starts the goroutine when none
// runs (on the tree's goroutine pool, which keeps a goroutine that did a store write, with its
// grown stack, for the next save a moment later); it ends when it finds the queue empty, so an
// idle checkpointer holds no goroutine. stop
// cancels the job running then (its result is not delivered) and the goroutine ends; no job
// starts after it.
type worker struct {
	ctx    context.Context
	cancel context.CancelFunc
	send   func(any)

	mu      sync.Mutex
	queue   []job
	running bool // a goroutine is working through the queue
}

func newWorker(send func(any)) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{ctx: ctx, cancel: cancel, send: send}
}

// submit queues j and starts the goroutine if none runs. It never blocks.
func (w *worker) submit(j job) {
	w.mu.Lock()
	w.queue = append(w.queue, j)
	start := !w.running && w.ctx.Err() == nil
	w.running = w.running || start
	w.mu.Unlock()
	if start {
		treekit.Go(w.run)
	}
}

// stop cancels the running job and ends the goroutine (without waiting for it).
func (w *worker) stop() { w.cancel() }

func (w *worker) run() {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 || w.ctx.Err() != nil {
			w.running = false
			w.mu.Unlock()
			return
		}
		j := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		res := j(w.ctx)
		if w.ctx.Err() != nil {
			w.mu.Lock()
			w.running = false
			w.mu.Unlock()
			return
		}
		if res != nil {
			w.send(res)
		}
	}
}

// sender returns a send function that delivers messages to pid from outside any actor.
func sender(sys *actor.ActorSystem, pid *actor.PID) func(any) {
	return func(msg any) { sys.Root.Send(pid, msg) }
}

// boundIO returns c with Store, Gaps, Positions and Snapshots wrapped so that every call gets
// c.IOTimeout: a server that does not answer fails the call instead of holding the worker.
func (c Config) boundIO() Config {
	d := c.IOTimeout
	c.Store = boundedStore{c.Store, d, c.Admit}
	if c.Gaps != nil {
		c.Gaps = boundedGaps{c.Gaps, d}
	}
	c.Positions = boundedPositions{c.Positions, d}
	if c.Snapshots != nil {
		c.Snapshots = boundedSnapshots{c.Snapshots, d}
	}
	return c
}

type boundedSnapshots struct {
	next store.SnapshotStore
	d    time.Duration
}

func (s boundedSnapshots) LoadSnapshot(ctx context.Context, scope store.Scope) (sn store.Snapshot, ok bool, err error) {
	err = treekit.Bounded(ctx, s.d, func(ctx context.Context) error { sn, ok, err = s.next.LoadSnapshot(ctx, scope); return err })
	return sn, ok, err
}

func (s boundedSnapshots) SaveSnapshot(ctx context.Context, sn store.Snapshot) error {
	return treekit.Bounded(ctx, s.d, func(ctx context.Context) error { return s.next.SaveSnapshot(ctx, sn) })
}

type boundedStore struct {
	next  Store
	d     time.Duration
	admit func(context.Context) (func(), error) // Config.Admit; nil: none
}

// call runs one store call: admitted first (outside the IOTimeout), then bounded by it.
func (s boundedStore) call(ctx context.Context, call func(context.Context) error) error {
	if s.admit != nil {
		release, err := s.admit(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	return treekit.Bounded(ctx, s.d, call)
}

func (s boundedStore) Load(ctx context.Context, scope store.Scope) (cp store.Checkpoint, ok bool, err error) {
	err = s.call(ctx, func(ctx context.Context) error { cp, ok, err = s.next.Load(ctx, scope); return err })
	return cp, ok, err
}

func (s boundedStore) Save(ctx context.Context, cp store.Checkpoint) error {
	return s.call(ctx, func(ctx context.Context) error { return s.next.Save(ctx, cp) })
}

type boundedGaps struct {
	next GapRecorder
	d    time.Duration
}

func (g boundedGaps) RecordGap(ctx context.Context, gap store.Gap) error {
	return treekit.Bounded(ctx, g.d, func(ctx context.Context) error { return g.next.RecordGap(ctx, gap) })
}

type boundedPositions struct {
	next PositionSource
	d    time.Duration
}

func (p boundedPositions) Current(ctx context.Context) (tok bson.Raw, ts bson.Timestamp, err error) {
	err = treekit.Bounded(ctx, p.d, func(ctx context.Context) error { tok, ts, err = p.next.Current(ctx); return err })
	return tok, ts, err
}
