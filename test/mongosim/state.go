package mongosim

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// nodeState is the replica-set role of the simulated node, the pause switch and the topology
// version that streaming hello clients watch.
type nodeState struct {
	mu        sync.Mutex
	processID bson.ObjectID
	counter   int64
	term      int64
	electedAt time.Time     // when the current term began (replSetGetStatus electionDate)
	secondary bool          // stepped down
	until     time.Time     // end of the current step-down
	changed   chan struct{} // closed and replaced on every topology change
	paused    bool
	unpaused  chan struct{} // closed when Resume is called
	stepTimer *time.Timer
}

func (n *nodeState) init() {
	n.processID = bson.NewObjectID()
	n.term = 1
	n.electedAt = time.Now()
	n.changed = make(chan struct{})
	n.unpaused = make(chan struct{})
	close(n.unpaused)
}

// topologyVersion returns the current {processId, counter} document and a channel that is
// closed at the next change.
func (n *nodeState) topologyVersion() (bson.D, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return bson.D{{Key: "processId", Value: n.processID}, {Key: "counter", Value: n.counter}}, n.changed
}

func (n *nodeState) bumpLocked() {
	n.counter++
	close(n.changed)
	n.changed = make(chan struct{})
}

// roleInfo returns whether the node is primary and its electionId.
func (n *nodeState) roleInfo() (primary bool, electionID bson.ObjectID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.secondary, electionIDFor(n.term)
}

func electionIDFor(term int64) bson.ObjectID {
	var id bson.ObjectID
	id[0], id[1], id[2], id[3] = 0x7f, 0xff, 0xff, 0xff
	for i := 0; i < 8; i++ {
		id[11-i] = byte(term >> (8 * i))
	}
	return id
}

// checkPrimary fails reads and writes while the node is stepped down, with the codes a real
// secondary returns.
func (n *nodeState) checkPrimary(kind cmdKind) *cmdError {
	n.mu.Lock()
	sec := n.secondary
	n.mu.Unlock()
	if !sec {
		return nil
	}
	switch kind {
	case kindWrite:
		return errorf(codeNotWritablePrimary, "not primary")
	case kindRead:
		return errorf(codeNotPrimaryNoSecondaryOk, "not primary and secondaryOk=false")
	}
	return nil
}

// topologyVersionFor returns the topologyVersion to attach to an error reply. A server attaches
// it to the not-primary errors, and to the shutdown errors (ShutdownInProgress 91,
// InterruptedAtShutdown 11600) only while it is really shutting down: a shutdown error raised
// otherwise (a fail point) must not carry the current version, or the driver takes it for stale
// and never marks the server Unknown.
func (n *nodeState) topologyVersionFor(code int32, shuttingDown bool) (bson.D, bool) {
	switch code {
	case codeShutdownInProgress, codeInterruptedAtShutdown:
		if !shuttingDown {
			return nil, false
		}
	case codeNotWritablePrimary, codeNotPrimaryNoSecondaryOk, codeNotPrimaryOrSecondary,
		codeInterruptedDueToReplStateChange, codePrimarySteppedDown, 10058:
	default:
		return nil, false
	}
	tv, _ := n.topologyVersion()
	return tv, true
}

// StepDown makes the node a secondary for d, as replSetStepDown would: hello reports
// secondary, writes fail with NotWritablePrimary (10107), reads with NotPrimaryNoSecondaryOk
// (13435), both labelled as a real server labels them, and open change-stream getMores fail
// with a resumable error. After d the node is re-elected with a higher electionId. Each
// transition bumps topologyVersion, so streaming clients notice at once.
func (s *Server) StepDown(d time.Duration) error {
	if s.isClosing() {
		return ErrClosed
	}
	if d <= 0 {
		d = time.Millisecond
	}
	n := &s.state
	n.mu.Lock()
	n.secondary = true
	n.until = time.Now().Add(d)
	n.bumpLocked()
	if n.stepTimer != nil {
		n.stepTimer.Stop()
	}
	n.stepTimer = time.AfterFunc(d, s.reelect)
	n.mu.Unlock()
	s.eng.interruptChangeStreams()
	return nil
}

func (s *Server) reelect() {
	n := &s.state
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.secondary || time.Now().Before(n.until) {
		return
	}
	n.secondary = false
	n.term++
	n.electedAt = time.Now()
	n.bumpLocked()
}

// Pause makes the server stop executing commands: requests are read and then held until
// Resume, as if the process were frozen (a long GC pause or SIGSTOP). Connections stay open.
func (s *Server) Pause() {
	n := &s.state
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.paused {
		n.paused = true
		n.unpaused = make(chan struct{})
	}
}

// Resume undoes Pause; held commands run in arrival order per connection.
func (s *Server) Resume() {
	n := &s.state
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused {
		n.paused = false
		close(n.unpaused)
	}
}

// waitUnpaused blocks while the server is paused; false if ctx ended first.
func (s *Server) waitUnpaused(ctx context.Context) bool {
	n := &s.state
	n.mu.Lock()
	ch := n.unpaused
	n.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

func (n *nodeState) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stepTimer != nil {
		n.stepTimer.Stop()
	}
	if n.paused {
		n.paused = false
		close(n.unpaused)
	}
}
