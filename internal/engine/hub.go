package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/messages"
)

// Shared cursors (watchtree.Shared, the default of Collection streams): a hub per (client, database, option class)
// owns one change stream on the database, filtered with {"ns.coll": {$in: [...]}} over its
// members' collections, and feeds each member (a Shared Collection stream) the events of its
// collection. A member is the stream actor's stream.Cursor: the stream tree (checkpointer,
// dispatcher, supervisor) is the same as a dedicated stream's, only the cursor differs.
//
// A member joins by catching up, then attaching: it opens a cursor of its own on its collection
// from its own position (a catch-up cursor, one of at most catchUpCursors at a time in the
// runtime), reads it until its batch is used up, then attaches to the hub when the hub covers its
// collection from at or before the member's position and the hub's ring of recent events
// reaches back to it: the ring's events of its collection after its position are its first
// events. Otherwise it keeps catching up (the hub covers the collection but the ring no longer
// reaches back) or parks without a cursor (the hub does not cover the collection yet: it will
// at its next reopen, from its own position). A member drops every event at or before its
// position, and while nothing is buffered its position follows the hub's high-water marks (its
// cursor's, or a probe's while the cursor yields none: probe).

const (
	// catchUpCursors bounds the commands of catch-up cursors (an open, a getMore) and the
	// position captures of Shared streams (checkpointer PositionSource, Spawn's SingleLeader
	// check) that run at once in a runtime: with the hubs' own cursors, the connections the
	// Shared streams hold. A token is held for one command, never across a stall of the stream.
	catchUpCursors = 4
	// startSlots bounds the Spawns of Shared streams under way at once in a runtime (their
	// checkpoint reads and writes, position capture and namespace check): with catchUpCursors
	// and the hubs' cursors, what keeps many Spawns at once within a few connections.
	startSlots = 8
	// hubRing is the number of recent events a hub keeps for members that attach.
	hubRing = 4096
	// memberQueue and memberQueueBytes bound the events a member may have buffered, in number
	// and in bytes (the events are slices of the hub's driver replies, which they keep alive);
	// a member that falls that far behind is detached and catches up alone.
	memberQueue      = 8192
	memberQueueBytes = 16 << 20
	// hubQuiet and hubMaxDelay batch membership changes: a hub reopens hubQuiet after the last
	// change that needs it, and at most hubMaxDelay after the first.
	hubQuiet    = 100 * time.Millisecond
	hubMaxDelay = time.Second
	// parkLimit is how long a member waits without a cursor for the hub to cover its
	// collection before it catches up on a cursor of its own again.
	parkLimit = 10 * time.Second
	// catchUpAwait is a catch-up cursor's MaxAwaitTime (at most the stream's): an empty
	// getMore means the member is level with its collection, and may attach.
	catchUpAwait = 100 * time.Millisecond
	// hubCloseTimeout bounds the close (killCursors) of hub and catch-up cursors.
	hubCloseTimeout = 5 * time.Second
	// hubProbeEvery is how long a hub's cursor may go without a high-water mark before the hub
	// probes for one of its own (probe): while a collection of the database is written faster
	// than MaxAwaitTime, every batch ends with an event, and the positions of the quiet members
	// would not move until the load stops. Oplog windows are hours; a few seconds behind is
	// plenty, and a probe is two short commands.
	hubProbeEvery = 5 * time.Second
	// hubProbeTimeout bounds a probe (its aggregate and killCursors).
	hubProbeTimeout = 5 * time.Second
)

// sharedReason says why a Shared stream keeps a dedicated cursor; "" when it can share. The
// hub routes events by ns.coll, so a pipeline may only filter them ($match stages).
func sharedReason(spec *Spec) string {
	if !spec.Shared {
		return ""
	}
	if spec.Scope() != ScopeCollection {
		return "only Collection streams share a cursor"
	}
	// A required image fails the whole change stream at the first change without one: on a
	// shared cursor, a change of any collection of the database (the stores' own, another
	// tenant's) whose images are not recorded would fail every member.
	if spec.FullDocument == "required" {
		return "FullDocument Required: a shared cursor would fail on another collection's change without a post-image"
	}
	if spec.PreImage == "required" {
		return "FullDocumentBeforeChange Required: a shared cursor would fail on another collection's change without a pre-image"
	}
	for i, st := range spec.Pipeline {
		elems, err := st.Elements()
		if err != nil || len(elems) != 1 || elems[0].Key() != "$match" {
			return fmt.Sprintf("its Pipeline[%d] is not a $match stage (a shared cursor's pipeline may only filter events)", i)
		}
	}
	return ""
}

// hubKey identifies a hub: the client, the database and the option class.
type hubKey struct {
	client                 *mongo.Client
	db                     string
	fullDocument, preImage string
	split                  Split
	pipeline               string // the user's $match stages, marshalled, concatenated
}

func keyOf(spec *Spec, client *mongo.Client, db string) hubKey {
	var p strings.Builder
	for _, st := range spec.Pipeline {
		p.Write(st)
	}
	return hubKey{client: client, db: db, fullDocument: spec.FullDocument, preImage: spec.PreImage, split: spec.Split, pipeline: p.String()}
}

// hubSet is a runtime's hubs and its pool of catch-up cursors. Its hubs' goroutines stop with
// stop (Runtime.Stop).
type hubSet struct {
	clk      clock.Clock
	log      *zap.Logger
	connect  time.Duration
	maxAwait time.Duration
	catchUps tokens // a token per catch-up command or position capture under way
	starts   tokens // a token per Spawn of a Shared stream under way

	mu      sync.Mutex
	hubs    map[hubKey]*hub
	stopped bool
	wg      sync.WaitGroup

	opens atomic.Int64 // hub cursor opens, all hubs (tests and the log)
}

func newHubSet(clk clock.Clock, log *zap.Logger, connect time.Duration) *hubSet {
	return &hubSet{clk: clk, log: log.Named("hub"), connect: connect, maxAwait: defaultMaxAwaitTime,
		catchUps: newTokens(catchUpCursors, "catch-up cursors of shared streams"),
		starts:   newTokens(startSlots, "starts of shared streams at once"), hubs: map[hubKey]*hub{}}
}

// stop cancels every hub and waits for their goroutines.
func (hs *hubSet) stop() {
	hs.mu.Lock()
	hs.stopped = true
	for _, h := range hs.hubs {
		h.close()
	}
	hs.mu.Unlock()
	hs.wg.Wait()
}

// join registers m with the hub of key (made and started when there is none). It returns nil
// once the runtime stopped: m then stays on its own cursor.
func (hs *hubSet) join(key hubKey, m *member) *hub {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.stopped {
		return nil
	}
	h := hs.hubs[key]
	if h == nil {
		h = newHub(hs, key)
		hs.hubs[key] = h
		hs.wg.Add(1)
		go h.run()
	}
	h.add(m)
	return h
}

// ringEvent is an event a hub read: its collection, its token's _data, and the event.
type ringEvent struct {
	coll string
	tok  string
	id   bson.Raw
	raw  bson.Raw
}

// hub owns one change stream of a database for the members of an option class. Its cursor is
// read on its own goroutine (run), the only one that opens, reads and closes it; h.cancel (stop)
// is its one cancel path. Members call add, leave and attach from their readers' goroutines.
type hub struct {
	set    *hubSet
	key    hubKey
	w      *driverWatcher
	log    *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // wakes run: a reopen is due, or the hub may retire

	mu       sync.Mutex
	colls    map[string]int                  // the members' collections, with their member counts
	since    map[string]string               // the collections the cursor reads, each from a position
	members  map[*member]struct{}            // every registered member
	attached map[string]map[*member]struct{} // the attached members, by collection
	pos      bson.Raw                        // the hub's position: its last event's token or PBRT; nil: none yet
	posData  string
	// follow is the latest post-batch token that is not an event's token (a high-water mark):
	// the one position of the hub that every member may hold. A collection change stream
	// resumed from the token of another collection's event fails on a real server ("the resume
	// token was not found"), so a member never takes the hub's event tokens.
	follow     bson.Raw
	followData string
	// seen is the latest post-batch token that was the last routed event's: no member's
	// position, but the point every member with nothing queued has read through (its lag).
	seen     bson.Raw
	seenData string
	// probed is a probe's high-water mark, followed once the hub's position passes it;
	// followAt is when follow last moved (or the cursor opened): a probe is due hubProbeEvery
	// after it, while none is pending.
	probed     bson.Raw
	probedData string
	followAt   time.Time
	lastEv     string      // the token of the last event routed
	ring       []ringEvent // the recent events, oldest first
	ringFloor  string      // the ring holds every event after this position ("": none)
	debounce   clock.Timer // armed while a reopen is pending
	firstDue   time.Time   // when the first pending change was made
	due        bool        // a reopen is due (the debounce fired)
	readCancel context.CancelFunc
	retired    bool
	broken     bool // the cursor failed and has not opened since: members catch up, never park
}

func newHub(hs *hubSet, key hubKey) *hub {
	spec := &Spec{Name: "hub:" + key.db, Database: key.db, FullDocument: key.fullDocument, PreImage: key.preImage, Split: key.split}
	for _, st := range splitPipeline(key.pipeline) {
		spec.Pipeline = append(spec.Pipeline, st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{set: hs, key: key, w: newDriverWatcher(spec, key.client, key.db), log: hs.log.With(zap.String("database", key.db)),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), colls: map[string]int{}, since: map[string]string{},
		members: map[*member]struct{}{}, attached: map[string]map[*member]struct{}{}}
}

// splitPipeline splits concatenated BSON documents.
func splitPipeline(p string) []bson.Raw {
	var out []bson.Raw
	b := []byte(p)
	for len(b) >= 4 {
		n := int(int32(b[0]) | int32(b[1])<<8 | int32(b[2])<<16 | int32(b[3])<<24)
		if n <= 0 || n > len(b) {
			break
		}
		out = append(out, bson.Raw(b[:n]))
		b = b[n:]
	}
	return out
}

// close cancels the hub (hubSet.stop, with hs.mu held).
func (h *hub) close() {
	h.mu.Lock()
	if h.debounce != nil {
		h.debounce.Stop()
		h.debounce = nil
	}
	h.mu.Unlock()
	h.cancel()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// add registers m; a collection the cursor does not read yet asks for a reopen. hs.mu is held.
func (h *hub) add(m *member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.members[m] = struct{}{}
	h.colls[m.coll]++
	if _, ok := h.since[m.coll]; !ok {
		h.changedLocked()
	}
}

// leave unregisters m. Removals wait for the next reopen, but the last member's leaving
// retires the hub after the debounce.
func (h *hub) leave(m *member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.members[m]; !ok {
		return
	}
	delete(h.members, m)
	delete(h.attached[m.coll], m)
	if h.colls[m.coll]--; h.colls[m.coll] <= 0 {
		delete(h.colls, m.coll)
	}
	if len(h.members) == 0 {
		h.changedLocked()
	}
}

// changedLocked arms the debounce: the reopen is due hubQuiet after the last change, at most
// hubMaxDelay after the first.
func (h *hub) changedLocked() {
	now := h.set.clk.Now()
	if h.debounce == nil {
		h.firstDue = now
	} else {
		h.debounce.Stop()
	}
	wait := min(hubQuiet, h.firstDue.Add(hubMaxDelay).Sub(now))
	h.debounce = h.set.clk.AfterFunc(max(wait, 0), h.fire)
}

// fire ends the debounce: a reopen is due when a member's collection is not read, or when no
// member is left; a read under way is interrupted.
func (h *hub) fire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.debounce = nil
	if !h.reopenNeededLocked() {
		return
	}
	h.due = true
	if h.readCancel != nil {
		h.readCancel()
	}
	signal(h.kick)
}

func (h *hub) reopenNeededLocked() bool {
	if len(h.members) == 0 {
		return true
	}
	for c := range h.colls {
		if _, ok := h.since[c]; !ok {
			return true
		}
	}
	return false
}

// run is the hub's goroutine: it opens the cursor once a reopen is due and reads it until the
// next one, an error (the hub resets, after a backoff) or stop.
func (h *hub) run() {
	defer h.set.wg.Done()
	defer h.detachAll("the shared cursor stopped")
	var backoff time.Duration
	for {
		colls, rctx, ok := h.await()
		if !ok {
			return
		}
		err := h.read(rctx, colls)
		if h.ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
		h.log.Warn("shared cursor failed; its members catch up on cursors of their own, and it reopens from the current position",
			zap.Error(err), zap.Duration("backoff", backoff))
		h.reset("the shared cursor failed: " + err.Error())
		if !h.sleep(backoff) {
			return
		}
	}
}

// sleep waits d on the clock, or until stop.
func (h *hub) sleep(d time.Duration) bool {
	done := make(chan struct{})
	t := h.set.clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-h.ctx.Done():
		t.Stop()
		return false
	}
}

// await waits until a reopen is due and returns the collections to read, with the read's
// context: made in the same hold of h.mu that consumes due, so that a change made after the
// collections were taken cancels this very read (fire), never an earlier one. false: stop, or
// the hub retired (no member left: it leaves the set).
func (h *hub) await() ([]string, context.Context, bool) {
	for {
		h.set.mu.Lock()
		h.mu.Lock()
		if len(h.members) == 0 && h.debounce == nil {
			h.retired = true
			if h.set.hubs[h.key] == h {
				delete(h.set.hubs, h.key)
			}
			h.mu.Unlock()
			h.set.mu.Unlock()
			return nil, nil, false
		}
		if h.due {
			h.due = false
			colls := make([]string, 0, len(h.colls))
			for c := range h.colls {
				colls = append(colls, c)
			}
			rctx, cancel := context.WithCancel(h.ctx)
			h.readCancel = cancel
			h.mu.Unlock()
			h.set.mu.Unlock()
			return colls, rctx, true
		}
		h.mu.Unlock()
		h.set.mu.Unlock()
		select {
		case <-h.kick:
		case <-h.ctx.Done():
			return nil, nil, false
		}
	}
}

// reset forgets the hub's position, ring and coverage, and detaches every member: they catch
// up on cursors of their own, and the next open starts from the current position.
// One hold of the lock: a member attaching in between would stay attached to the hub's new
// position and skip what lies between.
func (h *hub) reset(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.detachAllLocked(why)
	h.pos, h.posData, h.ring, h.ringFloor = nil, "", nil, ""
	h.follow, h.followData, h.lastEv = nil, "", ""
	h.seen, h.seenData, h.probed, h.probedData = nil, "", nil, ""
	h.broken = true
	h.since = map[string]string{}
	h.due = true
}

func (h *hub) detachAll(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.detachAllLocked(why)
}

func (h *hub) detachAllLocked(why string) {
	for c, ms := range h.attached {
		for m := range ms {
			m.detach(why)
		}
		delete(h.attached, c)
	}
	for m := range h.members {
		signal(m.wake)
	}
}

// nsMatch is {$match: {"ns.coll": {$in: colls}}}.
func nsMatch(colls []string) bson.Raw {
	in := make(bson.A, len(colls))
	for i, c := range colls {
		in[i] = c
	}
	b, err := bson.Marshal(bson.D{{Key: "$match", Value: bson.D{{Key: "ns.coll", Value: bson.D{{Key: "$in", Value: in}}}}}})
	if err != nil { // unreachable: strings
		panic(err)
	}
	return b
}

// read opens the cursor from the hub's position (the current one when it has none) on colls,
// and reads it until a reopen is due, stop, or an error. rctx is await's; read cancels it.
func (h *hub) read(rctx context.Context, colls []string) error {
	defer h.endRead()
	h.mu.Lock()
	from := stream.Position{Kind: messages.StartKind_START_KIND_UNSPECIFIED, MaxAwaitTime: h.set.maxAwait, Comment: "watchtree:hub:" + h.key.db}
	if h.pos != nil {
		from.Kind, from.Token = messages.StartKind_START_KIND_RESUME_AFTER, h.pos
	}
	h.mu.Unlock()
	h.w.pipeline = append([]bson.Raw{nsMatch(colls)}, h.w.spec.WatchPipeline()...)
	cur, err := h.w.bounded(h.set.connect).Open(rctx, from)
	if err != nil {
		if rctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), hubCloseTimeout)
		_ = cur.Close(cctx)
		ccancel()
	}()
	n := h.set.opens.Add(1)
	var floor bson.Raw // where a fresh cursor starts: it reads every event after it
	if from.Token == nil {
		if floor = cur.ResumeToken(); len(floor) == 0 {
			// The first batch holds events, and the driver knows no token before them: the
			// first event's token is the floor (it is left to the members' own cursors, as is
			// everything before it). Without a floor, members would attach from positions older
			// than the cursor's start, and lose what lies between.
			if !cur.TryNext(rctx) {
				if err := cur.Err(); err != nil {
					return err
				}
				return errors.New("the shared cursor's first batch had neither events nor a post-batch token")
			}
			if _, _, op := envelopeOf(cur.Current()); op == "invalidate" {
				return errors.New("the shared cursor was invalidated (dropDatabase)")
			}
			floor = cur.ResumeToken()
		}
	}
	h.mu.Lock()
	h.broken = false
	h.followAt = h.set.clk.Now()
	start := h.posData
	if from.Token == nil {
		h.pos, h.posData = cloneRaw(floor), tokenData(floor)
		h.ringFloor, start = h.posData, h.posData
		h.lastEv = ""
	}
	for _, c := range colls {
		if _, ok := h.since[c]; !ok {
			h.since[c] = start
		}
	}
	for c := range h.since {
		if h.colls[c] == 0 {
			delete(h.since, c)
		}
	}
	for m := range h.members {
		signal(m.wake) // parked members look again
	}
	h.mu.Unlock()
	h.log.Debug("shared cursor open", zap.Int("collections", len(colls)), zap.Int64("opens", n))
	for {
		if !cur.TryNext(rctx) {
			if rctx.Err() != nil {
				return nil
			}
			if err := cur.Err(); err != nil {
				return err
			}
			if serverClosed(cur) {
				return errors.New("the server closed the shared cursor")
			}
			h.advance(cur.ResumeToken())
			continue
		}
		raw := cur.Current()
		id, coll, op := envelopeOf(raw)
		if op == "invalidate" {
			return errors.New("the shared cursor was invalidated (dropDatabase)")
		}
		h.route(ringEvent{coll: coll, tok: tokenData(id), id: id, raw: raw})
		if cur.RemainingBatchLength() == 0 {
			h.advance(cur.ResumeToken())
			if h.probeDue() {
				h.probe(rctx)
			}
		}
	}
}

// probeDue reports whether the hub has gone hubProbeEvery without a high-water mark, with no
// probe's mark pending.
func (h *hub) probeDue() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.probedData == "" && h.set.clk.Now().Sub(h.followAt) >= hubProbeEvery
}

// probeStage matches no change event: a probe reads post-batch tokens only.
var probeStage = func() bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$exists", Value: false}}}}}})
	if err != nil { // unreachable
		panic(err)
	}
	return b
}()

// probe gives the hub a high-water mark of its own when its cursor yields none. It opens a
// change stream on the database that matches no event, at the current time, and keeps the
// initial post-batch token, a high-water mark: it sorts before every event at or after its
// cluster time, and so after every event before it. Once the hub's position passes it, every
// event of every member's collection before it was routed, so a member with nothing queued may
// take it as its position (advance). A failed probe is retried hubProbeEvery later: the
// members' positions wait, nothing is lost. It runs on the hub's goroutine, between batches.
func (h *hub) probe(rctx context.Context) {
	ctx, cancel := context.WithTimeout(rctx, hubProbeTimeout)
	defer cancel()
	tok, err := h.probeToken(ctx)
	if err != nil && rctx.Err() != nil {
		return // a reopen or stop interrupted it
	}
	h.probeAnswered(tok, err)
}

// probeAnswered keeps a probe's mark as pending, or, when it failed, waits hubProbeEvery
// before the next.
func (h *hub) probeAnswered(tok bson.Raw, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.followAt = h.set.clk.Now()
		h.log.Debug("probing for a high-water mark failed; the next probe is in "+hubProbeEvery.String(), zap.Error(err))
		return
	}
	if d := tokenData(tok); d > h.followData {
		h.probed, h.probedData = tok, d
		h.followProbedLocked()
	} else {
		h.followAt = h.set.clk.Now()
	}
}

// probeToken is the probe's command pair: the aggregate and its killCursors.
func (h *hub) probeToken(ctx context.Context) (bson.Raw, error) {
	cs, err := h.w.Client.Database(h.key.db).Watch(ctx, []bson.Raw{probeStage},
		options.ChangeStream().SetComment("watchtree:hub-probe:"+h.key.db).SetBatchSize(0))
	if err != nil {
		return nil, err
	}
	tok := cloneRaw(cs.ResumeToken())
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hubCloseTimeout)
	_ = cs.Close(cctx) // a cursor left open times out on the server by itself
	cancel()
	if tokenData(tok) == "" {
		return nil, errors.New("the probe's reply had no post-batch resume token")
	}
	return tok, nil
}

// followProbedLocked makes a pending probe's mark the hub's follow once the hub's position
// has passed it, and drops it once follow has (h.mu held).
func (h *hub) followProbedLocked() {
	switch {
	case h.probedData == "":
	case h.probedData <= h.followData:
		h.probed, h.probedData = nil, ""
	case h.probedData <= h.posData:
		h.setFollowLocked(h.probed, h.probedData)
		h.probed, h.probedData = nil, ""
	}
}

// setFollowLocked moves follow and hands it to the attached members (h.mu held).
func (h *hub) setFollowLocked(tok bson.Raw, d string) {
	h.follow, h.followData, h.followAt = tok, d, h.set.clk.Now()
	for _, ms := range h.attached {
		for m := range ms {
			m.follow(h.follow, d)
		}
	}
}

// endRead cancels the read's context (await made it) and forgets its cancel: a later fire has
// nothing to interrupt.
func (h *hub) endRead() {
	h.mu.Lock()
	cancel := h.readCancel
	h.readCancel = nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// serverClosed reports whether the server closed cur (id 0).
func serverClosed(cur stream.Cursor) bool {
	ic, ok := cur.(interface{ ID() int64 })
	return ok && ic.ID() == 0
}

// route keeps ev in the ring and hands it to the attached members of its collection; a member
// whose queue is full is detached.
func (h *hub) route(ev ringEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.tok <= h.posData {
		return
	}
	h.ring = append(h.ring, ev)
	if len(h.ring) >= 2*hubRing {
		drop := len(h.ring) - hubRing
		h.ringFloor = h.ring[drop-1].tok
		h.ring = append(h.ring[:0:0], h.ring[drop:]...)
	}
	h.pos, h.posData, h.lastEv = ev.id, ev.tok, ev.tok
	for m := range h.attached[ev.coll] {
		if why := m.push(ev); why != "" {
			delete(h.attached[ev.coll], m)
			m.detach(why)
		}
	}
}

// advance moves the hub's position to its cursor's post-batch token. The attached members
// follow it while they have nothing buffered, unless it is the token of the last event routed
// (a batch ending with an event of another collection): they follow high-water marks only.
// Such a token is kept as seen instead: the point read through (lag), no position of theirs.
// A probe's high-water mark (probe) is followed once the position passes it.
func (h *hub) advance(pbrt bson.Raw) {
	d := tokenData(pbrt)
	h.mu.Lock()
	defer h.mu.Unlock()
	if d == "" || d < h.posData {
		return
	}
	if d > h.posData {
		h.pos, h.posData = cloneRaw(pbrt), d
	}
	if d == h.lastEv {
		h.seen, h.seenData = h.pos, d
	} else if d > h.followData {
		h.setFollowLocked(h.pos, d)
	}
	h.followProbedLocked()
}

// readThrough is the hub's newest post-batch token that was the last routed event's (seen):
// every event of every member's collection up to it was routed. Lag only (member.ReadThroughToken).
func (h *hub) readThrough() (bson.Raw, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen, h.seenData
}

// attachResult is what attach found.
type attachResult int

const (
	attachedNow attachResult = iota // attached: the ring's events after the position are queued
	notCovered                      // the hub does not read the collection yet (it may park)
	behind                          // the hub does not read it from as far back as the position, nor will it: catch up
)

// attach attaches m at its position pos when the hub covers its collection from at or before
// pos and the ring reaches back to pos.
func (h *hub) attach(m *member, posData string) attachResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.since[m.coll]
	if h.broken {
		// A member waiting for a failing hub would wait without a cursor, and never meet
		// the error its stream's RestartPolicy is there for: it reads its own cursor.
		return behind
	}
	if !ok || h.retired {
		if !h.retired && h.debounce == nil && !h.due {
			// Every change that needs a reopen arms one, but a member never waits on a
			// promise alone: a collection not read and no reopen pending asks for one.
			h.changedLocked()
		}
		if !h.retired && posData != "" && posData < h.posData {
			// The reopen will read the collection from the hub's own position, after the
			// member's: what lies between is the member's to read, on its own cursor.
			// Parking would close it, wait for the reopen, find the member behind and open it
			// again.
			return behind
		}
		return notCovered
	}
	if posData == "" || posData < s || posData < h.ringFloor {
		return behind
	}
	var q []ringEvent
	for _, ev := range h.ring {
		if ev.coll == m.coll && ev.tok > posData {
			q = append(q, ev)
		}
	}
	m.attachWith(q, h.follow, h.followData)
	as := h.attached[m.coll]
	if as == nil {
		as = map[*member]struct{}{}
		h.attached[m.coll] = as
	}
	as[m] = struct{}{}
	return attachedNow
}

// unattach removes m from the attached members (it leaves to catch up, after a drop).
func (h *hub) unattach(m *member) {
	h.mu.Lock()
	delete(h.attached[m.coll], m)
	h.mu.Unlock()
}

// envelopeOf returns an event's _id, ns.coll and operationType.
func envelopeOf(raw bson.Raw) (id bson.Raw, coll, op string) {
	if v, err := raw.LookupErr("_id"); err == nil {
		id, _ = v.DocumentOK()
	}
	if v, err := raw.LookupErr("ns", "coll"); err == nil {
		coll, _ = v.StringValueOK()
	}
	if v, err := raw.LookupErr("operationType"); err == nil {
		op, _ = v.StringValueOK()
	}
	return id, coll, op
}

// tokenData is a resume token's _data ("" when it has none): its string order is the event
// order (store.ComparePositions).
func tokenData(tok bson.Raw) string {
	if len(tok) == 0 {
		return ""
	}
	v, err := tok.LookupErr("_data")
	if err != nil {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}

func cloneRaw(b bson.Raw) bson.Raw {
	if b == nil {
		return nil
	}
	return append(bson.Raw(nil), b...)
}
