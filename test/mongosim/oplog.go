package mongosim

import (
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// oplogEntry is one change in the history: what a change stream turns into an event.
type oplogEntry struct {
	seq        uint64         // global position, strictly increasing; the token's tie-breaker
	ts         bson.Timestamp // clusterTime; shared by all entries of one transaction
	txnOpIndex uint32         // position among the entries sharing ts
	wall       time.Time      // wallTime
	op         string         // insert, update, replace, delete, drop, rename, dropDatabase, create, createIndexes, dropIndexes, modify
	db, coll   string
	collUUID   bson.Binary // collection UUID (subtype 4)
	docKey     bson.D      // {_id: …} for document events
	doc        bson.D      // the inserted or replacing document (insert, replace)
	pre        bson.D      // pre-image, kept only when the collection has pre-images enabled
	post       bson.D      // post-image of an update, kept only when pre/post images are enabled
	updateDesc bson.D      // {updatedFields, removedFields, truncatedArrays} (update)
	toDB       string      // rename target
	toColl     string
	opDesc     bson.D // operationDescription of expanded events (createIndexes, …)
	lsid       bson.D // {id, uid} for events of multi-document transactions
	txnNumber  *int64

	// Document versions, for snapshot reads (snapshotread.go): versioned is set on every
	// document write; key is the _id hash key and prev the version the write replaced (nil
	// for an insert).
	versioned bool
	key       string
	prev      *docSlot
	dropped   *collection // drop: the collection as it was dropped (no longer changed)
}

// oplog is the bounded change history. It keeps at most capacity entries and, when retention
// is positive, none older than retention. floor is the earliest cluster time from which the
// history is complete: a change stream may start or resume at or after it, not before.
//
// All methods require engine.mu.
type oplog struct {
	capacity  int
	retention time.Duration
	ring      []*oplogEntry // ring buffer of retained entries, oldest at head
	head      int
	n         int
	nextSeq   uint64
	floor     bson.Timestamp
	start     bson.Timestamp // the floor at start-up: the set's initiation (oplogview.go)
	uuid      bson.Binary    // local.oplog.rs's collection UUID

	// Snapshot history (snapshotread.go): entries keep the versions they replaced for
	// versionWindow (negative: not at all); vfrom is the seq of the first entry that still
	// does, vfloor the cluster time of the newest entry that no longer does.
	versionWindow time.Duration
	vfrom         uint64
	vfloor        bson.Timestamp
}

func newOplog(capacity int, retention time.Duration, start bson.Timestamp) *oplog {
	return &oplog{capacity: capacity, retention: retention, nextSeq: 1, floor: start, start: start, uuid: newUUID()}
}

// append adds entries (assigning their seq) and trims the history to its bounds.
func (o *oplog) append(now time.Time, entries ...*oplogEntry) {
	for _, en := range entries {
		en.seq = o.nextSeq
		o.nextSeq++
		if o.n == len(o.ring) {
			o.grow()
		}
		if o.n == o.capacity {
			o.dropOldest()
		}
		o.ring[(o.head+o.n)%len(o.ring)] = en
		o.n++
	}
	if o.retention > 0 {
		cutoff := now.Add(-o.retention)
		for o.n > 0 && o.at(0).wall.Before(cutoff) {
			o.dropOldest()
		}
	}
	o.pruneVersions(now)
}

func (o *oplog) grow() {
	size := 2 * len(o.ring)
	if size < 1024 {
		size = 1024
	}
	if size > o.capacity {
		size = o.capacity
	}
	if size <= len(o.ring) {
		return
	}
	nr := make([]*oplogEntry, size)
	for i := 0; i < o.n; i++ {
		nr[i] = o.at(i)
	}
	o.ring, o.head = nr, 0
}

func (o *oplog) dropOldest() {
	old := o.at(0)
	o.ring[o.head] = nil
	o.head = (o.head + 1) % len(o.ring)
	o.n--
	if next := tsNext(old.ts); tsLess(o.floor, next) {
		o.floor = next
	}
}

// at returns the i-th retained entry, oldest first.
func (o *oplog) at(i int) *oplogEntry { return o.ring[(o.head+i)%len(o.ring)] }

// len returns the number of retained entries.
func (o *oplog) len() int { return o.n }

// lastSeq returns the seq of the newest entry ever appended (0 if none).
func (o *oplog) lastSeq() uint64 { return o.nextSeq - 1 }

// indexAfterSeq returns the index of the first retained entry with seq > seq.
func (o *oplog) indexAfterSeq(seq uint64) int {
	return sort.Search(o.n, func(i int) bool { return o.at(i).seq > seq })
}

// indexAtTS returns the index of the first retained entry with ts >= ts.
func (o *oplog) indexAtTS(ts bson.Timestamp) int {
	return sort.Search(o.n, func(i int) bool { return !tsLess(o.at(i).ts, ts) })
}

// historyFloor returns the earliest cluster time the history is complete from.
func (o *oplog) historyFloor() bson.Timestamp { return o.floor }

// truncateBefore drops every entry with ts < ts and raises the floor to ts, as if the capped
// oplog had rolled over: resuming from an earlier point then fails with history lost.
func (o *oplog) truncateBefore(ts bson.Timestamp) {
	for o.n > 0 && tsLess(o.at(0).ts, ts) {
		o.dropOldest()
	}
	if tsLess(o.floor, ts) {
		o.floor = ts
	}
}

// TruncateOplog discards the change history before the given cluster time, as a capped oplog
// that rolled over would. Change streams resuming from an earlier token then fail with
// ChangeStreamHistoryLost (286). Use Server.ClusterTime to get a point to truncate at.
func (s *Server) TruncateOplog(before bson.Timestamp) {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	s.eng.oplog.truncateBefore(before)
}

// ClusterTime returns the most recent cluster time (the last applied optime).
func (s *Server) ClusterTime() bson.Timestamp { return s.eng.clock.last() }

// logLocked appends the entries of one write to the oplog and wakes the change streams that
// wait for them. Entries of one write share the cluster time the caller ticked; their
// txnOpIndex orders them. Caller holds e.mu.
func (e *engine) logLocked(entries ...*oplogEntry) {
	now := e.s.opts.Now()
	for _, en := range entries {
		if en.wall.IsZero() {
			en.wall = now
		}
	}
	e.oplog.append(now, entries...)
	e.hub.notifyLocked(entries)
}
