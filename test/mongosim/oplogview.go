package mongosim

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// local.oplog.rs, read-only: the retained change history in the documents of a server's
// oplog, so that find (with sort {$natural: ±1}), count and aggregate read it, and operators
// (rs.printReplicationInfo) and tools get the oplog window: the times of its first and last
// entries. It is built from the history on each read; it is not stored.
//
// Each change is one entry: op "i" (insert, o the document), "u" (update, o {$v: 2, diff} with
// the changed fields by path, or a replacement document), "d" (delete), "c" (commands: create,
// drop, renameCollection, dropDatabase, createIndexes, dropIndexes, collMod); the writes of
// one transaction are one "c" applyOps entry, with its lsid and txnNumber; and the first entry
// of a history nothing was dropped from is the no-op "initiating set" of the set's start. Every
// entry has ts, t, v: 2 and wall.

const oplogNS = "oplog.rs"

// isOplogView reports whether db.coll is local.oplog.rs.
func isOplogView(db, coll string) bool { return db == "local" && coll == oplogNS }

// oplogViewLocked returns the documents of local.oplog.rs in natural order. When the command
// is a find that only needs the first or the last few (empty filter, no skip, a limit, no
// sort or a {$natural} one), only those are built. Caller holds e.mu.
func (e *engine) oplogViewLocked(c *command) []bson.D {
	groups := e.oplogGroupsLocked()
	if from, to, ok := naturalEnds(c, len(groups)); ok {
		groups = groups[from:to]
	}
	out := make([]bson.D, 0, len(groups)+1)
	if e.oplog.floor == e.oplog.start && (len(groups) == 0 || groups[0][0] == 0) {
		out = append(out, bson.D{
			{Key: "op", Value: "n"}, {Key: "ns", Value: ""},
			{Key: "o", Value: bson.D{{Key: "msg", Value: "initiating set"}}},
			{Key: "ts", Value: e.oplog.start}, {Key: "t", Value: int64(1)}, {Key: "v", Value: int64(2)},
			{Key: "wall", Value: bson.NewDateTimeFromTime(e.sessions.started)},
		})
	}
	for _, g := range groups {
		out = append(out, e.oplogEntryDoc(g[0], g[1]))
	}
	return out
}

// oplogGroupsLocked splits the retained history into entries of the view: [from, to) index
// ranges, one per change, or one per transaction (its changes share a cluster time).
func (e *engine) oplogGroupsLocked() [][2]int {
	o := e.oplog
	var groups [][2]int
	for i := 0; i < o.len(); {
		j := i + 1
		if en := o.at(i); en.txnNumber != nil {
			for j < o.len() && o.at(j).ts == en.ts && o.at(j).txnNumber != nil {
				j++
			}
		}
		groups = append(groups, [2]int{i, j})
		i = j
	}
	return groups
}

// naturalEnds returns the range of n entries a find needs when it reads only the first or the
// last ones in natural order.
func naturalEnds(c *command, n int) (from, to int, ok bool) {
	if c.Name != "find" {
		return 0, 0, false
	}
	if f, has := c.Arg("filter"); has {
		if d, _ := f.(bson.D); len(d) > 0 {
			return 0, 0, false
		}
	}
	if v, has := c.Arg("skip"); has {
		if k, _ := asInt64(v); k != 0 {
			return 0, 0, false
		}
	}
	lv, has := c.Arg("limit")
	limit, _ := asInt64(lv)
	if !has || limit == 0 {
		return 0, 0, false
	}
	if limit < 0 {
		limit = -limit
	}
	reverse := rdReverseNaturalHint(c)
	if sv, has := c.Arg("sort"); has {
		d, _ := sv.(bson.D)
		if len(d) > 0 {
			dir, isNatural := naturalSort(d)
			if !isNatural {
				return 0, 0, false
			}
			reverse = dir < 0
		}
	}
	k := int(min(limit+1, int64(n))) // +1: the "initiating set" entry may take a place
	if reverse {
		return n - k, n, true
	}
	return 0, k, true
}

// naturalSort reports whether a sort specification is {$natural: ±1}, and its direction.
func naturalSort(spec bson.D) (dir int64, ok bool) {
	if len(spec) != 1 || spec[0].Key != "$natural" {
		return 0, false
	}
	dir, ok = asInt64(spec[0].Value)
	return dir, ok && (dir == 1 || dir == -1)
}

// oplogEntryDoc renders history entries [from, to) as one oplog document.
func (e *engine) oplogEntryDoc(from, to int) bson.D {
	first := e.oplog.at(from)
	var d bson.D
	if first.txnNumber != nil {
		ops := make(bson.A, 0, to-from)
		for i := from; i < to; i++ {
			ops = append(ops, oplogOp(e.oplog.at(i)))
		}
		d = bson.D{
			{Key: "lsid", Value: first.lsid}, {Key: "txnNumber", Value: *first.txnNumber},
			{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"},
			{Key: "o", Value: bson.D{{Key: "applyOps", Value: ops}}},
		}
	} else {
		d = oplogOp(first)
	}
	d = append(d,
		bson.E{Key: "ts", Value: first.ts}, bson.E{Key: "t", Value: int64(1)}, bson.E{Key: "v", Value: int64(2)},
		bson.E{Key: "wall", Value: bson.NewDateTimeFromTime(first.wall)})
	if first.txnNumber != nil {
		d = append(d, bson.E{Key: "prevOpTime", Value: bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}})
	}
	return d
}

// oplogOp renders one change as an oplog operation (op, ns, ui, o, o2).
func oplogOp(en *oplogEntry) bson.D {
	ns, cmdNS := en.db+"."+en.coll, en.db+".$cmd"
	cmd := func(name string, v any, more bson.D) bson.D {
		o := append(bson.D{{Key: name, Value: v}}, more...)
		return bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: cmdNS}, {Key: "ui", Value: en.collUUID}, {Key: "o", Value: o}}
	}
	switch en.op {
	case "insert":
		return bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: ns}, {Key: "ui", Value: en.collUUID},
			{Key: "o", Value: en.doc}, {Key: "o2", Value: en.docKey}}
	case "replace":
		return bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: ns}, {Key: "ui", Value: en.collUUID},
			{Key: "o", Value: en.doc}, {Key: "o2", Value: en.docKey}}
	case "update":
		return bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: ns}, {Key: "ui", Value: en.collUUID},
			{Key: "o", Value: bson.D{{Key: "$v", Value: int32(2)}, {Key: "diff", Value: updateDiff(en.updateDesc)}}},
			{Key: "o2", Value: en.docKey}}
	case "delete":
		return bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: ns}, {Key: "ui", Value: en.collUUID}, {Key: "o", Value: en.docKey}}
	case "create":
		return cmd("create", en.coll, en.opDesc)
	case "drop":
		return cmd("drop", en.coll, nil)
	case "rename":
		return cmd("renameCollection", ns, bson.D{{Key: "to", Value: en.toDB + "." + en.toColl}, {Key: "stayTemp", Value: false}})
	case "dropDatabase":
		d := cmd("dropDatabase", int32(1), nil)
		return slices.DeleteFunc(d, func(e bson.E) bool { return e.Key == "ui" })
	case "createIndexes":
		return cmd("createIndexes", en.coll, en.opDesc)
	case "dropIndexes":
		return cmd("dropIndexes", en.coll, en.opDesc)
	case "modify":
		return cmd("collMod", en.coll, en.opDesc)
	case noopOp:
		return bson.D{{Key: "op", Value: "n"}, {Key: "ns", Value: ""}, {Key: "o", Value: en.opDesc}}
	}
	return bson.D{{Key: "op", Value: "n"}, {Key: "ns", Value: ns}, {Key: "o", Value: bson.D{{Key: "msg", Value: en.op}}}}
}

// updateDiff turns a change-stream updateDescription into the oplog's $v: 2 diff: u for set
// fields, d for removed ones (by path).
func updateDiff(desc bson.D) bson.D {
	var u bson.D
	d := bson.D{}
	if v, ok := lookupD(desc, "updatedFields"); ok {
		u, _ = v.(bson.D)
	}
	if v, ok := lookupD(desc, "removedFields"); ok {
		if a, ok := v.(bson.A); ok {
			for _, f := range a {
				if s, ok := f.(string); ok {
					d = append(d, bson.E{Key: s, Value: false})
				}
			}
		}
	}
	out := bson.D{}
	if len(u) > 0 {
		out = append(out, bson.E{Key: "u", Value: u})
	}
	if len(d) > 0 {
		out = append(out, bson.E{Key: "d", Value: d})
	}
	return out
}

// oplogStatsLocked returns the view's document count and encoded size, and the byte size the
// entry bound allows (the average entry size times OplogCapacity, at least 1 MiB): the
// maxSize of a capped collection. Caller holds e.mu.
func (e *engine) oplogStatsLocked() (count, size, maxSize int64) {
	c := &command{Name: "collStats"}
	docs := e.oplogViewLocked(c)
	for _, d := range docs {
		size += int64(approxSize(d))
	}
	count = int64(len(docs))
	maxSize = 1 << 20
	if count > 0 {
		maxSize = max(maxSize, size/count*int64(e.s.opts.OplogCapacity))
	}
	return count, size, maxSize
}

// oplogCollectionInfoLocked is local.oplog.rs's listCollections document. Its size option
// is estimated from the newest 100 entries, so listing stays cheap. Caller holds e.mu.
func (e *engine) oplogCollectionInfoLocked() bson.D {
	groups := e.oplogGroupsLocked()
	var sample int64
	n := 0
	for i := len(groups) - 1; i >= 0 && n < 100; i-- {
		sample += int64(approxSize(e.oplogEntryDoc(groups[i][0], groups[i][1])))
		n++
	}
	maxSize := int64(1 << 20)
	if n > 0 {
		maxSize = max(maxSize, sample/int64(n)*int64(e.s.opts.OplogCapacity))
	}
	return bson.D{
		{Key: "name", Value: oplogNS},
		{Key: "type", Value: "collection"},
		{Key: "options", Value: bson.D{{Key: "capped", Value: true}, {Key: "size", Value: maxSize}, {Key: "autoIndexId", Value: false}}},
		{Key: "info", Value: bson.D{{Key: "readOnly", Value: true}, {Key: "uuid", Value: e.oplog.uuid}}},
	}
}
