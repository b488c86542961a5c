package mongosim

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Snapshot reads: readConcern {level: "snapshot"} with or without atClusterTime, outside
// transactions on find, aggregate and distinct, and as the read time of a transaction.
//
// Every document write's oplog entry carries the version it replaced (setVersion), and a
// collection's drop entry the dropped collection. A read at cluster time T starts from the
// collection as it is now and walks the oplog back from the newest entry to the first after
// T, undoing each document change of that namespace; crossing its drop backwards restarts
// from the dropped collection, crossing its creation means the collection did not exist at T.
// So the history a snapshot can reach is the retained oplog: a T older than the oplog's floor
// (Options.OplogCapacity, Options.OplogRetention, TruncateOplog) fails with SnapshotTooOld
// (239), as a server's fails outside its snapshot history window. A rename of the namespace
// after T fails with SnapshotUnavailable (246). Without atClusterTime the read is at the
// latest cluster time; either way the reply's cursor (distinct: the reply) carries
// atClusterTime, which the driver's snapshot sessions send on their later reads.
//
// A document deleted after T comes back at the end of the natural order of the snapshot.

// Codes of snapshot reads.
const (
	codeSnapshotTooOld      = 239
	codeSnapshotUnavailable = 246
)

func init() {
	serverParameters["minSnapshotHistoryWindowInSeconds"] = serverParameter{value: func(s *Server) any {
		return int32(max(s.opts.SnapshotHistory, 0).Seconds())
	}, runtime: true, atStartup: true}
}

// pruneVersions releases the versions kept by entries older than the snapshot history
// window, oldest first, raising vfloor: a snapshot read needs every entry after its time.
// Amortised O(1) per appended entry.
func (o *oplog) pruneVersions(now time.Time) {
	if o.n == 0 {
		return
	}
	first := o.at(0).seq
	if o.vfrom < first {
		o.vfrom = first
	}
	cutoff := now.Add(-o.versionWindow)
	for o.vfrom-first < uint64(o.n) {
		en := o.at(int(o.vfrom - first))
		if o.versionWindow >= 0 && !en.wall.Before(cutoff) {
			return
		}
		en.prev, en.dropped, en.versioned = nil, nil, false
		if tsLess(o.vfloor, en.ts) {
			o.vfloor = en.ts
		}
		o.vfrom++
	}
}

// snapshotFloor is the oldest cluster time a snapshot read can read at.
func (o *oplog) snapshotFloor() bson.Timestamp {
	if tsLess(o.floor, o.vfloor) {
		return o.vfloor
	}
	return o.floor
}

// setVersion marks a document entry with the document's key and the version it replaced
// (nil: the document did not exist), which snapshot reads undo to see the data as it was.
func (en *oplogEntry) setVersion(key string, prev *docSlot) {
	en.key, en.prev, en.versioned = key, prev, true
}

// readConcernAt parses atClusterTime of a snapshot readConcern (ok false when absent).
func readConcernAt(rc bson.D) (ts bson.Timestamp, ok bool, err *cmdError) {
	v, has := lookupD(rc, "atClusterTime")
	if !has {
		return ts, false, nil
	}
	ts, isTS := v.(bson.Timestamp)
	if !isTS {
		return ts, false, errorf(codeTypeMismatch, "BSON field 'readConcern.atClusterTime' is the wrong type '%s', expected type 'timestamp'", typeName(v))
	}
	if ts.T == 0 {
		return ts, false, errorf(codeInvalidOptions, "readConcern atClusterTime value must not be a null timestamp or have zero seconds, got %s", formatTS(ts))
	}
	if hasKey(rc, "afterClusterTime") {
		return ts, false, errorf(codeInvalidOptions, "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency")
	}
	if hasKey(rc, "afterOpTime") {
		return ts, false, errorf(codeInvalidOptions, "Can not specify both atClusterTime and afterOpTime")
	}
	return ts, true, nil
}

func formatTS(ts bson.Timestamp) string { return fmt.Sprintf("Timestamp(%d, %d)", ts.T, ts.I) }

// snapshotTimeLocked fixes the cluster time a snapshot read of c reads at: its atClusterTime,
// or the latest cluster time, which the reply then reports. A time in the future fails with
// InvalidOptions, as on a server. Caller holds e.mu.
func (e *engine) snapshotTimeLocked(c *command) (bson.Timestamp, *cmdError) {
	now := e.clock.last()
	if !c.snapshotAtSet {
		c.snapshotAt, c.snapshotAtSet = now, true
		return now, nil
	}
	if tsLess(now, c.snapshotAt) {
		return c.snapshotAt, errorf(codeInvalidOptions, "readConcern atClusterTime value must not be greater than the current clusterTime. Requested clusterTime: %s; current clusterTime: %s",
			formatTS(c.snapshotAt), formatTS(now))
	}
	return c.snapshotAt, nil
}

// collectionAtLocked returns db.name as it was at cluster time ts (nil: it did not exist).
// The result is the live collection when nothing changed it since ts, and otherwise a
// read-only reconstruction sharing the (immutable) documents; forWrite also rebuilds its
// indexes' entries, for a transaction that writes to it. Caller holds e.mu.
func (e *engine) collectionAtLocked(db, name string, ts bson.Timestamp, forWrite bool) (*collection, *cmdError) {
	o := e.oplog
	if tsLess(ts, o.snapshotFloor()) {
		return nil, errorf(codeSnapshotTooOld, "Read timestamp %s is older than the oldest available timestamp.", formatTS(ts))
	}
	base := e.collLocked(db, name)
	start := o.indexAtTS(tsNext(ts))
	if start == o.len() {
		return base, nil
	}
	var undo map[string]*docSlot // key -> version at ts (nil: absent)
	for i := o.len() - 1; i >= start; i-- {
		en := o.at(i)
		if en.op == "rename" && en.toDB == db && en.toColl == name {
			base, undo = nil, nil // before the rename, the namespace held nothing
			continue
		}
		if en.db != db || en.coll != name {
			continue
		}
		switch {
		case en.versioned:
			if base == nil {
				continue // a change of an incarnation that ended before the newer one began
			}
			if undo == nil {
				undo = make(map[string]*docSlot)
			}
			undo[en.key] = en.prev
		case en.op == "drop":
			base, undo = en.dropped, nil
		case en.op == "create":
			base, undo = nil, nil
		case en.op == "rename":
			return nil, errorf(codeSnapshotUnavailable, "Unable to read from a snapshot due to pending collection catalog changes to %s.%s; please retry the operation. Snapshot timestamp is %s.",
				db, name, formatTS(ts))
		}
	}
	if base == nil || (len(undo) == 0 && !forWrite) {
		return base, nil
	}
	return base.versionAt(undo, forWrite), nil
}

// versionAt returns a copy of coll with the documents of undo put back as they were (nil:
// absent). Documents coll no longer has are appended in natural order.
func (coll *collection) versionAt(undo map[string]*docSlot, withIndexes bool) *collection {
	h := &collection{db: coll.db, name: coll.name, uuid: coll.uuid, options: coll.options,
		preAndPostImages: coll.preAndPostImages, byID: make(map[string]int, len(coll.byID)),
		indexes: coll.indexes}
	add := func(s *docSlot) {
		h.byID[s.key] = len(h.docs)
		h.docs = append(h.docs, s)
		h.order.insert(docID(s.doc), s.key)
		h.size += int64(s.size)
	}
	for _, s := range coll.docs {
		if s == nil {
			continue
		}
		if prev, ok := undo[s.key]; ok {
			if prev != nil {
				add(prev)
			}
			continue
		}
		add(s)
	}
	for key, prev := range undo {
		if prev != nil && coll.slot(key) == nil {
			add(prev)
		}
	}
	if withIndexes {
		h.indexes = make([]*index, len(coll.indexes))
		for i, ix := range coll.indexes {
			cp := ix.clone()
			if cp.unique {
				cp.entries = make(map[string]string)
				_ = h.buildIndex(cp)
			}
			h.indexes[i] = cp
		}
	}
	return h
}

// withAtClusterTime adds the snapshot time to a read's reply: in its cursor document, or at
// the top level (distinct).
func withAtClusterTime(c *command, reply bson.D) bson.D {
	if !c.snapshot || !c.snapshotAtSet {
		return reply
	}
	at := bson.E{Key: "atClusterTime", Value: c.snapshotAt}
	if len(reply) > 0 && reply[0].Key == "cursor" {
		if cd, ok := reply[0].Value.(bson.D); ok {
			out := append(bson.D{{Key: "cursor", Value: append(cd[:len(cd):len(cd)], at)}}, reply[1:]...)
			return out
		}
	}
	return append(reply, at)
}
