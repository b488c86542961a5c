package mongosim

import (
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// runTTLMonitor deletes expired documents of TTL indexes every Options.TTLMonitorInterval
// (default 60s, as a real server's TTL monitor) until stop is closed. Its deletes are ordinary
// "delete" oplog entries, so change streams see them.
func (e *engine) runTTLMonitor(stop <-chan struct{}) {
	interval := e.s.opts.TTLMonitorInterval
	if interval <= 0 {
		<-stop
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			e.runTTLPass()
		}
	}
}

// runTTLPass deletes, once, every document whose TTL-indexed date (the earliest one, for an
// array of dates) plus the index's expireAfterSeconds is before Options.Now(). Documents
// without a date in the field never expire; a partial TTL index only deletes documents that
// match its filter. Each delete gets its own cluster time, like any non-transactional write.
func (e *engine) runTTLPass() {
	now := e.s.opts.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	dbNames := make([]string, 0, len(e.dbs))
	for n := range e.dbs {
		dbNames = append(dbNames, n)
	}
	sort.Strings(dbNames)
	for _, dn := range dbNames {
		d := e.dbs[dn]
		if d == nil {
			continue
		}
		collNames := make([]string, 0, len(d.colls))
		for n := range d.colls {
			collNames = append(collNames, n)
		}
		sort.Strings(collNames)
		for _, cn := range collNames {
			coll := d.colls[cn]
			for _, ix := range coll.indexes {
				if ix.ttl {
					e.expireLocked(coll, ix, now)
				}
			}
		}
	}
}

// expireLocked deletes the documents of coll that ix says have expired at now.
func (e *engine) expireLocked(coll *collection, ix *index, now time.Time) {
	var expired []*docSlot
	coll.scanSlots(func(s *docSlot) bool {
		at, ok := ix.ttlExpiry(s.doc)
		if !ok || !at.Before(now) {
			return true
		}
		if ix.partial != nil {
			if m, err := ix.partial.Match(s.doc, nil); err != nil || !m {
				return true
			}
		}
		expired = append(expired, s)
		return true
	})
	for _, s := range expired {
		coll.removeSlot(s.key)
		en := &oplogEntry{ts: e.clock.tick(), op: "delete", db: coll.db, coll: coll.name, collUUID: coll.uuid,
			docKey: bson.D{{Key: "_id", Value: docID(s.doc)}}}
		if coll.preAndPostImages {
			en.pre = s.doc
		}
		en.setVersion(s.key, s)
		e.logLocked(en)
	}
}
