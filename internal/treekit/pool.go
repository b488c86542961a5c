package treekit

import (
	"time"
)

// workerLinger is how long a goroutine of the pool waits for more work after finishing some:
// long enough that a busy stream's actors (woken every few hundred microseconds during a
// catch-up) always find one, short enough that an idle stream keeps none and that a test's
// leak check (which retries for about half a second) sees the pool drain.
const workerLinger = 100 * time.Millisecond

// dispatcherThroughput is the number of messages a mailbox processes before it yields, as in
// protoactor's default dispatcher.
const dispatcherThroughput = 300

// pool runs the tree actors' mailboxes, and the goroutines started with Go, on goroutines that
// it keeps for a short while after they finish. protoactor's default dispatcher starts a new
// goroutine each time a mailbox gets a message after it went empty, and that goroutine grows
// its stack again (several copies for the depth of a receive through the supervisor's
// middleware, zap and protobuf), which is a measurable part of the CPU per event of a busy
// stream. A goroutine of the pool keeps its grown stack. Schedule never blocks and never
// waits for a goroutine to be free: when none is waiting, it starts one, so an actor that
// blocks can never stall another.
type pool struct {
	// work is unbuffered: a send succeeds only when a goroutine is parked on it.
	work chan func()
}

// Schedule runs fn on a waiting goroutine of the pool, or on a new one. It implements
// actor.Dispatcher.
func (p *pool) Schedule(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.worker(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (p *pool) Throughput() int { return dispatcherThroughput }

// worker runs fn, then whatever work comes within workerLinger of finishing the last one.
func (p *pool) worker(fn func()) {
	idle := time.NewTimer(workerLinger)
	defer idle.Stop()
	for {
		fn()
		fn = nil // no reference to the finished work while waiting
		idle.Reset(workerLinger)
		select {
		case fn = <-p.work:
		case <-idle.C:
			return
		}
	}
}

// goroutines is the pool of every stream tree of the process, as protoactor's default
// dispatcher is one for the process.
var goroutines = &pool{work: make(chan func())}

// Go runs fn on a goroutine of the pool (see pool): for the short-lived goroutines of a tree
// that start often while a stream is busy, such as a checkpointer's store writes. Like the go
// statement, it never blocks; a goroutine that fn ends (runtime.Goexit) is simply not reused.
func Go(fn func()) { goroutines.Schedule(fn) }
