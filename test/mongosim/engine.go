package mongosim

import (
	"sync"
	"sync/atomic"
)

// engine is the simulated node's data: the catalog, the oplog, sessions and cursors.
//
// One mutex, mu, guards all of it. Every command holds mu only while it reads or changes
// memory, never while it waits (awaitData getMores wait outside it, on the stream hub), so
// writes are never slowed by idle readers.
type engine struct {
	s     *Server
	clock *clusterClock

	mu       sync.Mutex
	dbs      map[string]*database // catalog.go
	oplog    *oplog               // oplog.go
	cursors  cursorTable          // cursor.go
	sessions sessionTable         // session.go
	hub      streamHub            // changestream.go: wakes waiting change-stream getMores
	txns     *txnTable            // txn.go: open and recently committed transactions per session

	stop chan struct{} // closed by shutdown: background monitors end

	// collationsUsed is set once any collection has a default collation: until then reads
	// need not look up the collection's collation (collation.go).
	collationsUsed atomic.Bool

	// eventsBuilt counts the change events built from oplog entries (tests compare it with and
	// without the namespace pushdown, nspushdown.go).
	eventsBuilt atomic.Int64
	// noNSPushdown turns the namespace pushdown off for the streams opened while it is set
	// (tests compare the two on one oplog).
	noNSPushdown atomic.Bool
}

func newEngine(s *Server) *engine {
	e := &engine{
		s:     s,
		clock: newClusterClock(s.opts.Now),
		dbs:   make(map[string]*database),
		stop:  make(chan struct{}),
	}
	e.oplog = newOplog(s.opts.OplogCapacity, s.opts.OplogRetention, e.clock.last())
	e.oplog.versionWindow = s.opts.SnapshotHistory
	e.cursors.init()
	e.sessions.init()
	e.hub.init()
	return e
}

// startBackground starts the engine's monitors (the TTL monitor). Each is owned by the
// engine and ends when shutdown closes e.stop.
func (e *engine) startBackground() {
	e.s.wg.Add(1)
	go func() {
		defer e.s.wg.Done()
		e.runTTLMonitor(e.stop)
	}()
	e.s.wg.Add(1)
	go func() {
		defer e.s.wg.Done()
		e.runNoopWriter(e.stop)
	}()
}

// shutdown ends the background monitors and wakes every waiting getMore.
func (e *engine) shutdown() {
	close(e.stop)
	e.s.state.stop()
	e.hub.closeAll()
}

// interruptChangeStreams fails the getMores of open change streams with a resumable
// replica-set state-change error, as a stepdown does on a real server.
func (e *engine) interruptChangeStreams() {
	e.hub.interrupt()
}
