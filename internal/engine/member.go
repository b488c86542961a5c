package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/messages"
)

// sharedWatcher is the stream actor's Watcher of a Shared stream: each Open makes a member of
// the stream's hub, with its first catch-up cursor open at from (so a refused pipeline fails the
// open, and the position is fixed when Open returns, as a dedicated cursor's is).
type sharedWatcher struct {
	set     *hubSet
	key     hubKey
	coll    string
	catchUp stream.Watcher // the stream's own (bounded) watcher
	log     *zap.Logger
	report  func(attached bool, why string) // the stream's CursorChanged (nil: none)
}

// Open opens the member's catch-up cursor at from (with one of the catch-up tokens for the
// open) and registers it with the hub.
func (w sharedWatcher) Open(ctx context.Context, from stream.Position) (stream.Cursor, error) {
	m := &member{set: w.set, coll: w.coll, catchUp: w.catchUp, log: w.log, maxAwait: from.MaxAwaitTime,
		comment: from.Comment, wake: make(chan struct{}, 1), report: w.report}
	if m.maxAwait <= 0 {
		m.maxAwait = defaultMaxAwaitTime
	}
	m.start = from
	if err := m.openCatchUp(ctx, from); err != nil {
		return nil, err
	}
	m.splits = cursorSplitsOf(m.cu)
	m.reportCursor(false, "") // a new incarnation catches up first
	m.hub = w.set.join(w.key, m)
	return m, nil
}

func cursorSplitsOf(cur stream.Cursor) bool {
	sc, ok := cur.(interface{ SplitsEvents() bool })
	return !ok || sc.SplitsEvents()
}

// errCatchUpClosed fails a member whose catch-up cursor the server closed without an error
// (the stream restarts from its checkpoint, as a dedicated stream does).
var errCatchUpClosed = errors.New("the server closed the catch-up cursor of a shared stream")

// memberState is where a member reads from.
type memberState uint8

const (
	catchingUp memberState = iota // its own cursor (cu); each of its commands takes a catch-up token
	parked                        // no cursor: waiting for the hub to read its collection
	attachedTo                    // the hub's events, through its queue
)

// cuRead is what a catch-up cursor's last read found: whether the member may park.
type cuRead uint8

const (
	cuFresh  cuRead = iota // opened, not read yet: its first batch, if any, is not loaded
	cuEvents               // its last read returned an event: more may follow
	cuLevel                // its last read returned none: level with its collection
)

// member is one Shared stream's cursor. Its methods run on the stream actor's reader
// goroutine; the hub's goroutine hands it events and post-batch tokens under mu.
type member struct {
	set      *hubSet
	hub      *hub // nil: the runtime stopped before it joined (it stays on its own cursor)
	coll     string
	catchUp  stream.Watcher
	log      *zap.Logger
	report   func(attached bool, why string)
	maxAwait time.Duration
	comment  string
	splits   bool

	// The reader goroutine's own.
	state       memberState
	cu          stream.Cursor // the catch-up cursor (catchingUp)
	pos         bson.Raw      // the member's position: its last event's token, or a post-batch token
	posData     string
	current     bson.Raw
	err         error
	start       stream.Position // the first position, reopened while it has no token
	afterDrop   bool            // its last event was a drop or rename: catch up from it (the invalidate follows)
	parkedSince time.Time       // when it parked
	cuRead      cuRead          // what the catch-up cursor's last read found
	parkExpired bool            // it waited parkLimit parked: it catches up until it attaches

	mu         sync.Mutex
	queue      []ringEvent // events handed by the hub, not read yet (from qhead)
	qhead      int
	qbytes     int      // the bytes of the events queued (from qhead)
	detachWhy  string   // why the hub let it go (detached)
	hubPos     bson.Raw // the hub's post-batch token (followed when the queue is empty)
	hubPosData string
	detached   bool          // the hub let it go (a full queue, a hub reset): catch up alone
	wake       chan struct{} // one slot: the hub has something for it
}

// openCatchUp opens the catch-up cursor at from, with a catch-up token for the open.
//
// A token is held for each command of a catch-up cursor (its open, and each getMore), never
// in between: a connection is busy only while a command runs, and a member whose stream reads
// nothing for a while (its handler slow, its dead-letter store down) must not keep the other
// members, or the next Spawn, from catching up.
func (m *member) openCatchUp(ctx context.Context, from stream.Position) error {
	if err := m.set.catchUps.take(ctx); err != nil {
		return err
	}
	// A catch-up cursor's empty getMore means it is level: it waits briefly, so that the
	// member attaches soon after.
	from.MaxAwaitTime = min(from.MaxAwaitTime, catchUpAwait)
	cu, err := m.catchUp.Open(ctx, from)
	m.set.catchUps.give()
	if err != nil {
		return err
	}
	m.cu, m.state, m.cuRead = cu, catchingUp, cuFresh
	if tok := cu.ResumeToken(); len(tok) > 0 {
		m.setPos(cloneRaw(tok))
	} else if len(from.Token) > 0 {
		m.setPos(cloneRaw(from.Token))
	}
	return nil
}

// closeCatchUp closes the catch-up cursor (its killCursors takes no token: it is short, and
// it frees a server cursor).
func (m *member) closeCatchUp() {
	if m.cu == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hubCloseTimeout)
	if err := m.cu.Close(ctx); err != nil {
		m.log.Debug("closing a catch-up cursor failed", zap.Error(err))
	}
	cancel()
	m.cu = nil
}

// nextCatchUp is the catch-up cursor's TryNext, with a catch-up token while it runs a getMore
// (its batch used up); false with m.err set when no token came (ctx ended).
func (m *member) nextCatchUp(ctx context.Context) bool {
	if m.cu.RemainingBatchLength() > 0 {
		return m.cu.TryNext(ctx)
	}
	if err := m.set.catchUps.take(ctx); err != nil {
		if ctx.Err() == nil {
			m.err = err
		}
		return false
	}
	defer m.set.catchUps.give()
	return m.cu.TryNext(ctx)
}

// setPos moves the position forward (never back).
func (m *member) setPos(tok bson.Raw) {
	if d := tokenData(tok); d > m.posData {
		m.pos, m.posData = tok, d
	}
}

// push queues ev (hub goroutine, hub.mu held); when the queue is full it returns why instead.
func (m *member) push(ev ringEvent) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue)-m.qhead >= memberQueue {
		return fmt.Sprintf("its buffer of %d events is full (it reads slower than its collection is written)", memberQueue)
	}
	if m.qbytes+len(ev.raw) > memberQueueBytes && len(m.queue) > m.qhead {
		return fmt.Sprintf("its buffer of %d MiB is full (it reads slower than its collection is written)", memberQueueBytes>>20)
	}
	m.queue = append(m.queue, ev)
	m.qbytes += len(ev.raw)
	signal(m.wake)
	return ""
}

// follow records the hub's post-batch token (hub goroutine, hub.mu held).
func (m *member) follow(tok bson.Raw, d string) {
	m.mu.Lock()
	m.hubPos, m.hubPosData = tok, d
	m.mu.Unlock()
	signal(m.wake)
}

// detach lets the member go (hub.mu held): it drops its queue and catches up alone; why is
// what its CursorChanged event says.
func (m *member) detach(why string) {
	m.mu.Lock()
	m.detached, m.detachWhy = true, why
	m.queue, m.qhead, m.qbytes = nil, 0, 0
	m.mu.Unlock()
	signal(m.wake)
}

// attachWith starts the queue with the ring's events (hub.mu held).
func (m *member) attachWith(q []ringEvent, hubPos bson.Raw, d string) {
	m.mu.Lock()
	m.queue, m.qhead, m.detached, m.qbytes = q, 0, false, 0
	for _, ev := range q {
		m.qbytes += len(ev.raw)
	}
	m.hubPos, m.hubPosData = hubPos, d
	m.mu.Unlock()
}

// pop returns the next queued event after the position; detached reports a hub that let go.
func (m *member) pop() (ev ringEvent, ok, detached bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.detached {
		return ev, false, true
	}
	for m.qhead < len(m.queue) {
		ev = m.queue[m.qhead]
		m.queue[m.qhead] = ringEvent{}
		m.qhead++
		m.qbytes -= len(ev.raw)
		if ev.tok > m.posData {
			return ev, true, false
		}
	}
	m.queue, m.qhead, m.qbytes = m.queue[:0], 0, 0
	return ev, false, false
}

// wait waits up to maxAwait for the hub, or ctx.
func (m *member) wait(ctx context.Context) {
	t := m.set.clk.AfterFunc(m.maxAwait, func() { signal(m.wake) })
	select {
	case <-m.wake:
	case <-ctx.Done():
	}
	t.Stop()
}

// tryAttach asks the hub to attach the member at its position: it attaches, parks (closing its
// catch-up cursor) or keeps catching up.
func (m *member) tryAttach() {
	if m.hub == nil || m.afterDrop {
		return
	}
	switch m.hub.attach(m, m.posData) {
	case attachedNow:
		m.closeCatchUp()
		m.state, m.parkExpired = attachedTo, false
		m.reportCursor(true, "level with the shared cursor")
	case notCovered:
		if m.state == catchingUp && !m.parkExpired && m.mayPark() {
			m.closeCatchUp()
			m.state, m.parkedSince = parked, m.set.clk.Now()
		}
	case behind:
		m.state = catchingUp // parked: the hub reads the collection, but from after the position
	}
}

// mayPark reports whether a catching-up member may close its cursor to wait for the hub to read
// its collection: once the cursor came back empty (level), or before its first read when the
// member starts at a token (a Spawn or a restart, most often with nothing to read: parking then
// saves the getMore that would show it, 10,000 of them at 10,000 Spawns). Never after a read
// that returned an event (its RemainingBatchLength is 0 at every batch's end, level or not: a
// backlog is read on, not dropped with its cursor to be opened again), nor before the first
// read of a start at an operation time (At), which has a backlog by definition. The driver
// loads a cursor's first batch on its first TryNext, so a fresh cursor looks empty even when
// its first batch holds events: parking there cost a backlog's first event about 110 ms and an
// open, and BenchmarkEndToEnd's catch-up ran at 0.65x a dedicated cursor's.
func (m *member) mayPark() bool {
	switch m.cuRead {
	case cuLevel:
		return true
	case cuFresh:
		return m.posData != ""
	}
	return false
}

// TryNext implements stream.Cursor: the next event of the catch-up cursor or of the hub's
// queue, or false after at most one wait (a getMore of the catch-up cursor, or MaxAwaitTime for
// the hub).
func (m *member) TryNext(ctx context.Context) bool {
	m.current = nil
	waited := false
	for ctx.Err() == nil {
		switch m.state {
		case attachedTo:
			if m.afterDrop {
				// A dedicated cursor on the collection reports the invalidate after a drop or
				// rename: read it from the member's own cursor.
				m.hub.unattach(m)
				m.state = catchingUp
				m.reportCursor(false, "its collection was dropped or renamed: the invalidate is read on its own cursor")
				continue
			}
			ev, ok, detached := m.pop()
			if ok {
				return m.deliver(ev.raw, ev.id)
			}
			if detached {
				m.mu.Lock()
				why := m.detachWhy
				m.mu.Unlock()
				m.state = catchingUp
				m.reportCursor(false, why)
				continue
			}
			if waited {
				return false
			}
			m.wait(ctx)
			waited = true
		case parked:
			m.tryAttach()
			if m.state != parked {
				continue
			}
			if m.set.clk.Now().Sub(m.parkedSince) > parkLimit {
				// It reads its own cursor until it attaches: parking again at once would
				// open and close a cursor every parkLimit and read nothing.
				m.state, m.parkExpired = catchingUp, true
				continue
			}
			if waited {
				return false
			}
			m.wait(ctx)
			waited = true
		case catchingUp:
			if m.cu == nil {
				from := stream.Position{Kind: messages.StartKind_START_KIND_RESUME_AFTER, Token: m.pos, MaxAwaitTime: m.maxAwait, Comment: m.comment}
				if len(m.pos) == 0 {
					from = m.start // no token yet (a start at an operation time): where it started
				}
				if err := m.openCatchUp(ctx, from); err != nil {
					if ctx.Err() == nil {
						m.err = err
					}
					return false
				}
			}
			if m.cu.RemainingBatchLength() == 0 {
				// Level with its own cursor's batch: the hub may take over.
				m.setPos(cloneRaw(m.cu.ResumeToken()))
				if m.tryAttach(); m.state != catchingUp {
					continue
				}
			}
			if waited {
				return false
			}
			if !m.nextCatchUp(ctx) {
				if m.err != nil {
					return false
				}
				m.cuRead = cuLevel
				if err := m.cu.Err(); err != nil {
					m.err = err
					return false
				}
				if serverClosed(m.cu) {
					m.err = errCatchUpClosed
					return false
				}
				waited = true
				continue
			}
			m.cuRead = cuEvents
			raw := m.cu.Current()
			id, _, _ := envelopeOf(raw)
			if tokenData(id) <= m.posData {
				continue
			}
			return m.deliver(raw, cloneRaw(id))
		}
	}
	return false
}

// reportCursor tells the stream's Observer (CursorChanged) and the stream's Status where the
// member reads now; reader goroutine.
func (m *member) reportCursor(attached bool, why string) {
	if m.report != nil {
		m.report(attached, why)
	}
}

// deliver makes raw the current event and its token the position.
func (m *member) deliver(raw, id bson.Raw) bool {
	m.setPos(id)
	m.current = raw
	_, _, op := envelopeOf(raw)
	m.afterDrop = op == "drop" || op == "rename"
	return true
}

// Current implements stream.Cursor.
func (m *member) Current() bson.Raw { return m.current }

// ResumeToken implements stream.Cursor: the last event's token, or, once nothing is buffered,
// the later of it and the post-batch token of the cursor it reads (its own or the hub's).
func (m *member) ResumeToken() bson.Raw {
	switch m.state {
	case catchingUp:
		if m.cu != nil && m.cu.RemainingBatchLength() == 0 {
			m.setPos(cloneRaw(m.cu.ResumeToken()))
		}
	case attachedTo:
		m.mu.Lock()
		if m.qhead >= len(m.queue) && !m.detached && !m.afterDrop {
			if m.hubPosData > m.posData {
				m.pos, m.posData = m.hubPos, m.hubPosData
			}
		}
		m.mu.Unlock()
	}
	return m.pos
}

// ReadThroughToken is the newest point the member has read through: its position or, attached
// with nothing queued, the hub's newest post-batch token when later, though it may be another
// collection's event (hub.seen). The stream actor reports it for lag only (reader goroutine).
//
// The hub's token is read before the queue: an event the hub routed before that token is
// then in the queue (or was read), and one routed after it is later than the token.
func (m *member) ReadThroughToken() bson.Raw {
	pos := m.ResumeToken()
	if m.state != attachedTo || m.afterDrop || m.hub == nil {
		return pos
	}
	seen, seenData := m.hub.readThrough()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.qhead >= len(m.queue) && !m.detached && seenData > m.posData {
		return seen
	}
	return pos
}

// RemainingBatchLength implements stream.Cursor.
func (m *member) RemainingBatchLength() int {
	switch m.state {
	case catchingUp:
		if m.cu != nil {
			return m.cu.RemainingBatchLength()
		}
	case attachedTo:
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.queue) - m.qhead
	}
	return 0
}

// Err implements stream.Cursor.
func (m *member) Err() error { return m.err }

// Close leaves the hub and closes the catch-up cursor.
func (m *member) Close(context.Context) error {
	if m.hub != nil {
		m.hub.leave(m)
	}
	m.closeCatchUp()
	return nil
}

// CurrentIsStable is true: events are sub-slices of driver replies, never reused.
func (m *member) CurrentIsStable() bool { return true }

// SplitsEvents is the first catch-up cursor's: the hub's cursor of the same option class
// splits alike.
func (m *member) SplitsEvents() bool { return m.splits }

// sharedPositions is a Shared stream's PositionSource: the captures take a catch-up token.
type sharedPositions struct {
	w   *driverWatcher
	set *hubSet
}

// Current captures the current position with one of the catch-up tokens.
func (p sharedPositions) Current(ctx context.Context) (bson.Raw, bson.Timestamp, error) {
	if err := p.set.catchUps.take(ctx); err != nil {
		return nil, bson.Timestamp{}, err
	}
	defer p.set.catchUps.give()
	return p.w.Current(ctx)
}
