package mongosim

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// ---------------------------------------------------------------------------------------------
// The stream hub: which change streams a write must wake.

// streamHub wakes the change streams a write concerns. Streams register by scope when they
// open (collection streams under db and collection, database streams under db, cluster streams
// globally) and stay registered until closed; a write signals only the streams registered for
// its namespace, so idle streams on other namespaces cost a write nothing. Signals are
// non-blocking sends on a one-slot channel per stream: a stream that is not waiting simply finds
// the signal pending at its next wait, and rescans the oplog.
//
// The registration maps are guarded by engine.mu. The broadcast channels (interrupt, closing)
// have their own mutex because StepDown and Close call in without engine.mu.
type streamHub struct {
	colls   map[string]map[string]map[*changeStream]struct{} // db -> coll -> streams
	dbs     map[string]map[*changeStream]struct{}            // db -> database streams
	cluster map[*changeStream]struct{}

	bmu        sync.Mutex
	interruptC chan struct{} // closed and replaced by interrupt()
	closing    chan struct{} // closed by closeAll()
	closed     bool
}

func (h *streamHub) init() {
	h.colls = make(map[string]map[string]map[*changeStream]struct{})
	h.dbs = make(map[string]map[*changeStream]struct{})
	h.cluster = make(map[*changeStream]struct{})
	h.interruptC = make(chan struct{})
	h.closing = make(chan struct{})
}

// registerLocked adds cs to the sets its scope is woken through. Caller holds engine.mu.
func (h *streamHub) registerLocked(cs *changeStream) {
	f := &cs.filter
	switch f.scope {
	case scopeCollection:
		m := h.colls[f.db]
		if m == nil {
			m = make(map[string]map[*changeStream]struct{})
			h.colls[f.db] = m
		}
		set := m[f.coll]
		if set == nil {
			set = make(map[*changeStream]struct{})
			m[f.coll] = set
		}
		set[cs] = struct{}{}
	case scopeDatabase:
		set := h.dbs[f.db]
		if set == nil {
			set = make(map[*changeStream]struct{})
			h.dbs[f.db] = set
		}
		set[cs] = struct{}{}
	default:
		h.cluster[cs] = struct{}{}
	}
}

// unregisterLocked removes cs and drops emptied sets. Caller holds engine.mu.
func (h *streamHub) unregisterLocked(cs *changeStream) {
	f := &cs.filter
	switch f.scope {
	case scopeCollection:
		if m := h.colls[f.db]; m != nil {
			if set := m[f.coll]; set != nil {
				delete(set, cs)
				if len(set) == 0 {
					delete(m, f.coll)
				}
			}
			if len(m) == 0 {
				delete(h.colls, f.db)
			}
		}
	case scopeDatabase:
		if set := h.dbs[f.db]; set != nil {
			delete(set, cs)
			if len(set) == 0 {
				delete(h.dbs, f.db)
			}
		}
	default:
		delete(h.cluster, cs)
	}
}

// notifyLocked wakes the streams that may turn entries into events. Called by logLocked with
// engine.mu held; it never blocks and costs O(streams registered for the entries' namespaces).
func (h *streamHub) notifyLocked(entries []*oplogEntry) {
	var lastDB, lastColl, lastOp string
	for i, en := range entries {
		if i > 0 && en.db == lastDB && en.coll == lastColl && en.op == lastOp {
			continue // same streams as the previous entry, already signalled
		}
		lastDB, lastColl, lastOp = en.db, en.coll, en.op
		if m := h.colls[en.db]; m != nil {
			if en.op == "dropDatabase" {
				for _, set := range m {
					wakeAll(set)
				}
			} else {
				wakeAll(m[en.coll])
			}
		}
		wakeAll(h.dbs[en.db])
		wakeAll(h.cluster)
	}
}

func wakeAll(set map[*changeStream]struct{}) {
	for cs := range set {
		select {
		case cs.wake <- struct{}{}:
		default:
		}
	}
}

// closeAll wakes every waiting change-stream getMore for server shutdown; they return
// InterruptedAtShutdown (11600) at once, and so do later ones.
func (h *streamHub) closeAll() {
	h.bmu.Lock()
	defer h.bmu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

// interrupt fails the change-stream getMores that are waiting now with
// InterruptedDueToReplStateChange (11602), as a stepdown does; the dispatcher labels it
// ResumableChangeStreamError. Later getMores are refused by the dispatcher while the node is
// not primary.
func (h *streamHub) interrupt() {
	h.bmu.Lock()
	defer h.bmu.Unlock()
	close(h.interruptC)
	h.interruptC = make(chan struct{})
}

// signals returns the current interrupt and closing channels.
func (h *streamHub) signals() (interrupt, closing <-chan struct{}) {
	h.bmu.Lock()
	defer h.bmu.Unlock()
	return h.interruptC, h.closing
}

// ---------------------------------------------------------------------------------------------
// The change-stream cursor.

// userPipeline is the part of a change-stream pipeline after $changeStream: stages that map
// one event to at most one document.
type userPipeline interface {
	Apply(doc bson.D, env *query.Env) (bson.D, bool, error)
}

// changeStream is an open change-stream cursor. It holds only its position in the oplog (no
// queue of its own), so a slow watcher costs no memory: it reads the retained history by
// position, and fails with ChangeStreamHistoryLost when the entries it still needs were
// discarded.
//
// The position fields are used only by the goroutine running next (cursor.go checks a cursor
// out to one getMore at a time).
type changeStream struct {
	e        *engine
	ns       string // cursor.ns
	filter   streamFilter
	opts     eventOptions
	pipeline userPipeline // nil when the pipeline has no stages after $changeStream
	nsp      *nsPushdown  // the leading $match's namespace condition, checked in scan; nil if none

	wake      chan struct{} // one slot; signalled by the hub on relevant writes
	killed    chan struct{} // closed by close()
	closeOnce sync.Once

	afterSeq          uint64         // every entry with seq <= afterSeq has been consumed
	minTS             bson.Timestamp // entries before this cluster time are skipped (start point)
	pbrt              resumeToken    // the last postBatchResumeToken; never moves backwards
	pendingInvalidate *oplogEntry    // an invalidating entry whose invalidate is not yet returned
	tokenUnseen       *resumeToken   // a resume token of an event outside the stream's namespace: the next event fails the stream
	done              bool           // the invalidate was returned

	// split is set by a final $changeStreamSplitLargeEvent stage: events over 16 MiB are
	// returned as fragments. skipSeq/skipFrags say that the first skipFrags fragments of the
	// event at oplog seq skipSeq were already returned (a full reply, or a resume from a
	// fragment's token); the event is rebuilt and its later fragments follow.
	split     bool
	skipSeq   uint64
	skipFrags uint32
}

func (cs *changeStream) namespace() string    { return cs.ns }
func (cs *changeStream) isChangeStream() bool { return true }

// close unregisters the stream from the hub and ends a getMore waiting on it.
func (cs *changeStream) close() {
	cs.closeOnce.Do(func() {
		cs.e.mu.Lock()
		cs.e.hub.unregisterLocked(cs)
		cs.e.mu.Unlock()
		close(cs.killed)
	})
}

// scanChunk bounds the oplog entries examined per hold of engine.mu.
const scanChunk = 4096

// next returns the next batch of events (at most n when n > 0; n < 0: an empty batch). With no
// event to return it waits up to maxWait for a relevant write, the end of the connection, a
// stepdown or server shutdown; on timeout it returns an empty batch with a fresh
// postBatchResumeToken. done is true once the invalidate event has been returned.
func (cs *changeStream) next(c *command, n int, maxWait time.Duration) ([]any, bson.D, bool, error) {
	if cs.done {
		return nil, cs.extra(), true, nil
	}
	if n < 0 {
		return nil, cs.extra(), false, nil
	}
	interrupt, closing := cs.e.hub.signals()
	var timer *time.Timer
	for {
		select { // a pending signal is covered by the scan below
		case <-cs.wake:
		default:
		}
		batch, err := cs.fill(n)
		if err != nil {
			return nil, nil, false, err
		}
		if len(batch) > 0 || cs.done || maxWait <= 0 {
			return batch, cs.extra(), cs.done, nil
		}
		if timer == nil {
			timer = time.NewTimer(maxWait)
			defer timer.Stop()
		}
		select {
		case <-cs.wake:
		case <-timer.C:
			// A last look refreshes the high-water mark past writes elsewhere.
			batch, err := cs.fill(n)
			if err != nil {
				return nil, nil, false, err
			}
			return batch, cs.extra(), cs.done, nil
		case <-interrupt:
			return nil, nil, false, errorf(codeInterruptedDueToReplStateChange, "operation was interrupted")
		case <-closing:
			return nil, nil, false, errorf(codeInterruptedAtShutdown, "interrupted at shutdown")
		case <-cs.killed:
			return nil, nil, false, errorf(237, "cursor killed while a getMore was waiting")
		case <-c.ctx.Done():
			// The connection is gone (killed, or the server closes): no reply can be sent, and
			// none must race the socket's close.
			return nil, nil, false, errCloseConnection
		}
	}
}

func (cs *changeStream) extra() bson.D {
	return bson.D{{Key: "postBatchResumeToken", Value: cs.pbrt.doc()}}
}

// scanItem is an oplog entry the stream must act on, copied out under engine.mu.
type scanItem struct {
	en         *oplogEntry
	visible    bool   // becomes an event
	invalidate bool   // ends the stream after its event
	rejected   bool   // visible, but the leading $match drops its event (nsPushdown): not built
	current    bson.D // updateLookup: the document at read time (nil if gone)
}

// fill collects the events available now, up to n (n == 0: as many as fit in a reply).
// It holds engine.mu only to copy entry pointers out of the oplog (entries are immutable once
// logged) and to look up current documents; events are built outside the lock.
func (cs *changeStream) fill(n int) ([]any, error) {
	var out []any
	size := 0
	full := func() bool { return n > 0 && len(out) >= n }
	// add appends one document (a bson.D, or a bson.Raw for a split event's fragments) of sz
	// encoded bytes; false when the reply is full.
	add := func(doc any, sz int, tok resumeToken) bool {
		if len(out) > 0 && size+sz > replyBudget {
			return false
		}
		size += sz
		out = append(out, doc)
		cs.pbrt = maxToken(cs.pbrt, tok)
		return true
	}
	// emit runs ev through the user pipeline and appends it; false when the reply is full and
	// ev must be returned by the next batch instead.
	emit := func(ev bson.D, tok resumeToken, ts bson.Timestamp) (bool, error) {
		doc, keep, err := cs.applyPipeline(ev, tok, ts)
		if err != nil || !keep {
			return true, err
		}
		sz := approxSize(doc)
		if sz > maxBSONSize {
			return false, errEventTooLarge(sz)
		}
		return add(doc, sz, tok), nil
	}
	// emitEvent is emit for the event of en, split into fragments when it is over the limit and
	// the pipeline ends with $changeStreamSplitLargeEvent. A reply that fills up between two
	// fragments records how many were returned; the next batch rebuilds the event and goes on.
	emitEvent := func(ev bson.D, en *oplogEntry) (bool, error) {
		tok := eventToken(en)
		doc, keep, err := cs.applyPipeline(ev, tok, en.ts)
		if err != nil || !keep {
			return true, err
		}
		raw, err := bson.Marshal(doc)
		if err != nil {
			return false, err
		}
		if len(raw) <= maxBSONSize || !cs.split {
			if len(raw) > maxBSONSize {
				return false, errEventTooLarge(len(raw))
			}
			if cs.skipSeq == en.seq {
				cs.skipSeq, cs.skipFrags = 0, 0
			}
			return add(doc, len(raw), tok), nil
		}
		frags, err := splitLargeEvent(raw, tok)
		if err != nil {
			return false, err
		}
		first := uint32(0)
		if cs.skipSeq == en.seq {
			first = cs.skipFrags
		}
		for i := first; i < uint32(len(frags)); i++ {
			if !add(frags[i].doc, len(frags[i].doc), frags[i].tok) {
				cs.skipSeq, cs.skipFrags = en.seq, i
				return false, nil
			}
		}
		cs.skipSeq, cs.skipFrags = 0, 0
		return true, nil
	}
	finishInvalidate := func(en *oplogEntry) (bool, error) {
		// An invalidate has no ns: the leading $match (covered, hence maybe no longer in the
		// pipeline) decides on the missing field, as it did when it ran on the event.
		if cs.nsp == nil || cs.nsp.admits("", "", false, false) {
			ok, err := emit(buildInvalidate(en), invalidateToken(en), en.ts)
			if err != nil || !ok {
				return ok, err
			}
		}
		cs.pendingInvalidate = nil
		cs.done = true
		cs.pbrt = maxToken(cs.pbrt, invalidateToken(en))
		return true, nil
	}
	if en := cs.pendingInvalidate; en != nil {
		_, err := finishInvalidate(en)
		return out, err
	}
	for !full() {
		want := scanChunk
		if n > 0 && n-len(out) < want {
			want = n - len(out)
		}
		items, scannedTo, caughtUp, lastApplied, err := cs.scan(want)
		if err != nil {
			return out, err
		}
		for _, it := range items {
			if full() {
				cs.afterSeq = it.en.seq - 1
				return out, nil
			}
			if cs.tokenUnseen != nil && (it.visible || it.invalidate) {
				return out, errorf(codeChangeStreamFatalError, "cannot resume stream; the resume token was not found. {_data: \"%s\"}", cs.tokenUnseen.hex())
			}
			if it.visible && (!it.rejected || mayFailToBuild(it.en, &cs.opts)) {
				ev, err := buildEvent(it.en, &cs.opts, it.current)
				cs.e.eventsBuilt.Add(1)
				if err != nil {
					return out, err
				}
				if !it.rejected {
					ok, err := emitEvent(ev, it.en)
					if err != nil {
						return out, err
					}
					if !ok {
						cs.afterSeq = it.en.seq - 1
						return out, nil
					}
				}
			}
			cs.afterSeq = it.en.seq
			if it.invalidate {
				cs.pendingInvalidate = it.en
				if full() {
					return out, nil
				}
				_, err := finishInvalidate(it.en)
				return out, err
			}
		}
		if scannedTo > cs.afterSeq {
			cs.afterSeq = scannedTo
		}
		if caughtUp {
			if len(out) == 0 {
				cs.pbrt = maxToken(cs.pbrt, hwmToken(tsNext(lastApplied)))
			}
			return out, nil
		}
	}
	return out, nil
}

// scan copies out up to want entries after the stream's position that it must act on.
// scannedTo is the seq of the last entry examined; caughtUp reports that the scan reached the
// end of the oplog; lastApplied is the cluster time at that moment. Fails with
// ChangeStreamHistoryLost when entries the stream has not read were discarded.
func (cs *changeStream) scan(want int) (items []scanItem, scannedTo uint64, caughtUp bool, lastApplied bson.Timestamp, err error) {
	e := cs.e
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.oplog
	if (o.len() > 0 && o.at(0).seq > cs.afterSeq+1) || (o.len() == 0 && o.lastSeq() > cs.afterSeq) {
		return nil, 0, false, bson.Timestamp{}, errHistoryLost()
	}
	scannedTo = cs.afterSeq
	i := o.indexAfterSeq(cs.afterSeq)
	examined := 0
	for ; i < o.len() && len(items) < want && examined < scanChunk; i++ {
		en := o.at(i)
		examined++
		scannedTo = en.seq
		if tsLess(en.ts, cs.minTS) {
			continue
		}
		vis := cs.filter.visible(en)
		inv := cs.filter.invalidates(en)
		if !vis && !inv {
			continue
		}
		// A rejected entry stays an item, so that batch limits, positions, tokens and the
		// unseen-token check step over it exactly as when its event was built and dropped.
		it := scanItem{en: en, visible: vis, invalidate: inv, rejected: vis && cs.nsp != nil && !cs.nsp.admitsEntry(en)}
		if vis && (!it.rejected || mayFailToBuild(en, &cs.opts)) && en.op == "update" && (cs.opts.fullDocument == fullDocUpdateLookup ||
			(cs.opts.expanded && en.post == nil && hasAmbiguousPath(en.updateDesc))) {
			it.current = lookupCurrent(e, en)
		}
		items = append(items, it)
		if inv {
			i++
			break
		}
	}
	caughtUp = i >= o.len()
	if len(items) > 0 && items[len(items)-1].invalidate {
		caughtUp = false
	}
	return items, scannedTo, caughtUp, e.clock.last(), nil
}

// errModifiedID is the error for an event whose _id the user's pipeline changed or removed.
func errModifiedID() *cmdError {
	return errorf(codeChangeStreamFatalError, "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.")
}

func errHistoryLost() *cmdError {
	return errorf(codeChangeStreamHistoryLost, "Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
}

// applyPipeline runs ev through the user's stages; keep is false when a $match dropped it.
// The result must keep the event's _id unchanged (ChangeStreamFatalError 280 otherwise).
func (cs *changeStream) applyPipeline(ev bson.D, tok resumeToken, ts bson.Timestamp) (bson.D, bool, error) {
	if cs.pipeline == nil {
		return ev, true, nil
	}
	env := &query.Env{Now: cs.e.s.opts.Now(), ClusterTime: ts}
	out, keep, err := cs.pipeline.Apply(ev, env)
	if err != nil {
		return nil, false, queryErr(err)
	}
	if !keep {
		return nil, false, nil
	}
	id, ok := lookupD(out, "_id")
	if !ok || !sameTokenDoc(id, tok) {
		return nil, false, errModifiedID()
	}
	return out, true, nil
}

// sameTokenDoc reports whether v is exactly the token document of tok.
func sameTokenDoc(v any, tok resumeToken) bool {
	got, err1 := bson.Marshal(bson.D{{Key: "v", Value: v}})
	want, err2 := bson.Marshal(bson.D{{Key: "v", Value: tok.doc()}})
	return err1 == nil && err2 == nil && bytes.Equal(got, want)
}

// queryErr converts an error of the query package to a command error with the same code.
func queryErr(err error) error {
	if qe, ok := err.(*query.Error); ok {
		return &cmdError{Code: qe.Code, Msg: qe.Msg}
	}
	return err
}

// ---------------------------------------------------------------------------------------------
// Opening a stream: the aggregate with a $changeStream first stage.

// Stages a change-stream pipeline may contain after $changeStream.
var csAllowedStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// Other stage names a server knows: they are refused in a change stream rather than reported
// as unknown.
var csKnownStages = map[string]bool{
	"$group": true, "$sort": true, "$limit": true, "$skip": true, "$count": true, "$unwind": true,
	"$lookup": true, "$out": true, "$merge": true, "$facet": true, "$bucket": true, "$bucketAuto": true,
	"$sample": true, "$geoNear": true, "$graphLookup": true, "$indexStats": true, "$collStats": true,
	"$densify": true, "$fill": true, "$setWindowFields": true, "$unionWith": true, "$documents": true,
	"$sortByCount": true, "$currentOp": true, "$listSessions": true, "$listLocalSessions": true,
	"$planCacheStats": true, "$search": true, "$searchMeta": true, "$vectorSearch": true,
}

// $changeStream options the server has but mongosim does not implement.
var csUnsupportedOptions = map[string]bool{
	"showSystemEvents": true, "showRawUpdateDescription": true, "allowToRunOnConfigDB": true,
	"allowToRunOnSystemNS": true, "showMigrationEvents": true, "$_resumeAfterClusterTime": true,
	"$_generateV2ResumeTokens": true,
}

// csAggregateFields are the aggregate fields a change-stream aggregate accepts besides the
// generic ones (lsid, comment, maxTimeMS, readConcern, ...).
var csAggregateFields = map[string]bool{
	"pipeline": true, "cursor": true, "collation": true, "allowDiskUse": true, "explain": true,
	"hint": true, "let": true, "bypassDocumentValidation": true,
}

// csSpec is a parsed $changeStream stage.
type csSpec struct {
	fullDocument        string
	fullDocBeforeChange string
	resumeAfter         any
	startAfter          any
	startAt             *bson.Timestamp
	expanded            bool
	allChanges          bool
}

func parseCSSpec(v any) (*csSpec, *cmdError) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(50808, "$changeStream stage expects a document as argument")
	}
	sp := &csSpec{fullDocument: fullDocDefault, fullDocBeforeChange: fullDocOff}
	boolOpt := func(key string, v any) (bool, *cmdError) {
		b, ok := v.(bool)
		if !ok {
			return false, errorf(codeTypeMismatch, "BSON field '$changeStream.%s' is the wrong type '%s', expected type 'bool'", key, typeName(v))
		}
		return b, nil
	}
	var err *cmdError
	for _, el := range d {
		switch el.Key {
		case "fullDocument":
			s, ok := el.Value.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field '$changeStream.fullDocument' is the wrong type '%s', expected type 'string'", typeName(el.Value))
			}
			switch s {
			case fullDocDefault, fullDocUpdateLookup, fullDocWhenAvailable, fullDocRequired:
			default:
				return nil, errorf(codeBadValue, "Enumeration value '%s' for field '$changeStream.fullDocument' is not a valid value.", s)
			}
			sp.fullDocument = s
		case "fullDocumentBeforeChange":
			s, ok := el.Value.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field '$changeStream.fullDocumentBeforeChange' is the wrong type '%s', expected type 'string'", typeName(el.Value))
			}
			switch s {
			case fullDocOff, fullDocWhenAvailable, fullDocRequired:
			default:
				return nil, errorf(codeBadValue, "Enumeration value '%s' for field '$changeStream.fullDocumentBeforeChange' is not a valid value.", s)
			}
			sp.fullDocBeforeChange = s
		case "resumeAfter":
			sp.resumeAfter = el.Value
		case "startAfter":
			sp.startAfter = el.Value
		case "startAtOperationTime":
			ts, ok := el.Value.(bson.Timestamp)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field '$changeStream.startAtOperationTime' is the wrong type '%s', expected type 'timestamp'", typeName(el.Value))
			}
			sp.startAt = &ts
		case "showExpandedEvents":
			if sp.expanded, err = boolOpt(el.Key, el.Value); err != nil {
				return nil, err
			}
		case "allChangesForCluster":
			if sp.allChanges, err = boolOpt(el.Key, el.Value); err != nil {
				return nil, err
			}
		default:
			if csUnsupportedOptions[el.Key] {
				return nil, unsupported("the $changeStream option '%s'", el.Key)
			}
			return nil, errorf(40415, "BSON field '$changeStream.%s' is an unknown field.", el.Key)
		}
	}
	if sp.resumeAfter != nil && sp.startAfter != nil {
		return nil, errorf(50865, "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage")
	}
	if sp.startAt != nil && (sp.resumeAfter != nil || sp.startAfter != nil) {
		return nil, errorf(40674, "Only one type of resume option is allowed, but multiple were found.")
	}
	return sp, nil
}

// compileUserStages checks and compiles the stages after $changeStream. split reports a final
// $changeStreamSplitLargeEvent stage, which is not part of the returned pipeline.
func compileUserStages(stages bson.A) (p userPipeline, split bool, cerr *cmdError) {
	for i, st := range stages {
		d, ok := st.(bson.D)
		if !ok || len(d) != 1 {
			return nil, false, errorf(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := d[0].Key
		switch {
		case name == "$changeStream":
			return nil, false, errorf(40602, "$changeStream is only valid as the first stage in a pipeline")
		case name == "$changeStreamSplitLargeEvent":
			if arg, ok := d[0].Value.(bson.D); !ok || len(arg) != 0 {
				return nil, false, errorf(7182800, "$changeStreamSplitLargeEvent spec must be an empty document")
			}
			if i != len(stages)-1 {
				return nil, false, errorf(7182802, "$changeStreamSplitLargeEvent can only appear once, as the last stage of the pipeline")
			}
			split = true
		case csAllowedStages[name]:
		case csKnownStages[name]:
			return nil, false, errorf(codeIllegalOperation, "%s is not permitted in a $changeStream pipeline", name)
		default:
			return nil, false, errorf(40324, "Unrecognized pipeline stage name: '%s'", name)
		}
	}
	if split {
		stages = stages[:len(stages)-1]
	}
	if len(stages) == 0 {
		return nil, split, nil
	}
	p, err := compilePipeline(stages)
	if err != nil {
		if ce, ok := queryErr(err).(*cmdError); ok {
			return nil, false, ce
		}
		return nil, false, errorf(codeBadValue, "%v", err)
	}
	return p, split, nil
}

// compilePipeline compiles the user's stages with the query package.
func compilePipeline(stages bson.A) (userPipeline, error) {
	p, err := query.CompilePipeline(stages)
	if err != nil {
		return nil, err
	}
	if !p.PerDocument() {
		return nil, unsupported("this combination of stages after $changeStream")
	}
	return p, nil
}

// lookupCurrent returns the current version of en's document for fullDocument: updateLookup,
// or nil when it is gone. Caller holds engine.mu.
func lookupCurrent(e *engine, en *oplogEntry) bson.D {
	if doc, found := e.lookupCurrentLocked(en.db, en.coll, en.docKey); found {
		return doc
	}
	return nil
}

// cmdAggregateChangeStream opens a change stream: the aggregate handler (read.go) calls it when
// the pipeline starts with $changeStream. The reply's firstBatch holds the events already
// available (normally none) and always a postBatchResumeToken.
func cmdAggregateChangeStream(s *Server, c *command) (bson.D, error) {
	c.ChangeStream = true
	if err := readCheckFields(c, csAggregateFields); err != nil {
		return nil, err
	}
	if v, ok := c.Arg("explain"); ok && v != false {
		return nil, unsupported("explain of a $changeStream aggregate")
	}
	if v, ok := c.Arg("cursor"); !ok {
		return nil, errorf(codeFailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	} else if _, ok := v.(bson.D); !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'aggregate.cursor' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	if c.InTransaction() {
		return nil, errorf(263, "Operation not permitted in transaction: $changeStream cannot run in a multi-document transaction")
	}
	pv, _ := c.Arg("pipeline")
	stages, ok := pv.(bson.A)
	if !ok || len(stages) == 0 {
		return nil, errorf(codeTypeMismatch, "'pipeline' option must be specified as an array")
	}
	first, _ := stages[0].(bson.D)
	if len(first) != 1 || first[0].Key != "$changeStream" {
		return nil, errorf(40602, "$changeStream is only valid as the first stage in a pipeline")
	}
	sp, cerr := parseCSSpec(first[0].Value)
	if cerr != nil {
		return nil, cerr
	}
	if v, ok := c.Arg("collation"); ok {
		if d, ok := v.(bson.D); ok && len(d) > 0 {
			if loc, _ := lookupD(d, "locale"); loc != "simple" {
				return nil, unsupported("collations on change streams")
			}
		}
	}

	// Scope.
	f := streamFilter{db: c.DB, expanded: sp.expanded}
	var ns string
	switch target := c.Body[0].Value.(type) {
	case string:
		if sp.allChanges {
			return nil, errorf(codeInvalidOptions, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name")
		}
		switch c.DB {
		case "admin", "config", "local":
			return nil, errorf(codeInvalidNamespace, "$changeStream may not be opened on the internal %s database", c.DB)
		}
		if strings.HasPrefix(target, "system.") {
			return nil, errorf(codeInvalidNamespace, "$changeStream may not be opened on the internal %s.%s collection", c.DB, target)
		}
		f.scope, f.coll, ns = scopeCollection, target, c.DB+"."+target
	default:
		if n, ok := asInt64(target); !ok || n != 1 {
			return nil, errorf(codeFailedToParse, "Invalid command format: the 'aggregate' field must specify a collection name or 1")
		}
		ns = c.DB + ".$cmd.aggregate"
		switch {
		case sp.allChanges && c.DB == "admin":
			f.scope = scopeCluster
		case sp.allChanges:
			return nil, errorf(codeInvalidOptions, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name")
		case c.DB == "admin" || c.DB == "config" || c.DB == "local":
			return nil, errorf(codeInvalidNamespace, "$changeStream may not be opened on the internal %s database", c.DB)
		default:
			f.scope = scopeDatabase
		}
	}
	pipe, split, cerr := compileUserStages(stages[1:])
	if cerr != nil {
		return nil, cerr
	}
	var nsp *nsPushdown
	if !s.eng.noNSPushdown.Load() {
		nsp = parseNSPushdown(stages[1:])
	}
	if nsp != nil && nsp.covered {
		// The scan applies the whole $match: the rest of the pipeline runs without it (none
		// at all when it was the only stage).
		if pipe, _, cerr = compileUserStages(stages[2:]); cerr != nil {
			return nil, cerr
		}
	}

	// Resume token (decoded before taking the lock).
	var tok *resumeToken
	startAfter := false
	if sp.resumeAfter != nil || sp.startAfter != nil {
		raw := sp.resumeAfter
		if raw == nil {
			raw, startAfter = sp.startAfter, true
		}
		t, cerr := decodeResumeToken(raw)
		if cerr != nil {
			return nil, cerr
		}
		if t.fromInvalidate && !startAfter {
			return nil, errorf(codeInvalidResumeToken, "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification")
		}
		if t.fragment > 0 && !split {
			return nil, errorf(codeChangeStreamFatalError, "Attempting to resume a change stream from a split event fragment, but the pipeline has no $changeStreamSplitLargeEvent stage")
		}
		tok = &t
	}

	cs := &changeStream{
		e: s.eng, ns: ns, filter: f, pipeline: pipe, nsp: nsp, split: split,
		opts:   eventOptions{fullDocument: sp.fullDocument, fullDocBeforeChange: sp.fullDocBeforeChange, expanded: sp.expanded},
		wake:   make(chan struct{}, 1),
		killed: make(chan struct{}),
	}
	if err := cs.position(tok, sp.startAt); err != nil {
		return nil, err
	}
	n, _ := batchSizeArg(c)
	return s.eng.firstBatch(c, cs, int(n))
}

// position sets the stream's start point (reference §3.4) and registers it with the hub, in
// one hold of engine.mu so that no write falls between the two.
func (cs *changeStream) position(tok *resumeToken, startAt *bson.Timestamp) *cmdError {
	e := cs.e
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.oplog
	// seqBeforeTS returns the position just before the first retained entry at or after ts.
	seqBeforeTS := func(ts bson.Timestamp) uint64 {
		if i := o.indexAtTS(ts); i < o.len() {
			return o.at(i).seq - 1
		}
		return o.lastSeq()
	}
	switch {
	case tok == nil && startAt == nil:
		// One tick beyond the most recent operation, so the stream does not return it.
		start := tsNext(e.clock.last())
		cs.afterSeq, cs.minTS, cs.pbrt = o.lastSeq(), start, hwmToken(start)
	case startAt != nil:
		if tsLess(*startAt, o.historyFloor()) {
			return errHistoryLost()
		}
		cs.afterSeq, cs.minTS, cs.pbrt = seqBeforeTS(*startAt), *startAt, hwmToken(*startAt)
	case tok.isHWM():
		if tsLess(tok.ts, o.historyFloor()) {
			return errHistoryLost()
		}
		cs.afterSeq, cs.minTS, cs.pbrt = seqBeforeTS(tok.ts), tok.ts, *tok
	default:
		if tsLess(tok.ts, o.historyFloor()) {
			return errHistoryLost()
		}
		var en *oplogEntry
		if i := o.indexAfterSeq(tok.seq - 1); i < o.len() {
			if cand := o.at(i); cand.seq == tok.seq && cand.ts == tok.ts && cand.txnOpIndex == tok.txnOpIndex {
				en = cand
			}
		}
		if en == nil {
			return errorf(codeChangeStreamFatalError, "cannot resume stream; the resume token was not found. {_data: \"%s\"}", tok.hex())
		}
		cs.afterSeq, cs.pbrt = en.seq, *tok
		if tok.fragment > 0 {
			// Inside a split event: it is rebuilt, and the fragments after this one follow (none
			// when it was the last).
			cs.afterSeq, cs.skipSeq, cs.skipFrags = en.seq-1, en.seq, tok.fragment
		}
		if !tok.fromInvalidate && cs.filter.invalidates(en) {
			// Resuming after the event that invalidated the stream yields the invalidate again.
			cs.pendingInvalidate = en
		}
		if !tok.fromInvalidate && !cs.filter.inNamespace(en) && !cs.filter.invalidates(en) {
			// The token is another namespace's event: the server looks for it among this
			// stream's events, and fails once it meets a later one (not at the open).
			cs.tokenUnseen = tok
		}
	}
	e.hub.registerLocked(cs)
	return nil
}

// String describes the stream for debugging.
func (cs *changeStream) String() string {
	return fmt.Sprintf("changeStream(%s after seq %d)", cs.ns, cs.afterSeq)
}

// errEventTooLarge is the server's error for a change event over 16 MiB without
// $changeStreamSplitLargeEvent (or with a single top-level field too large to split off).
func errEventTooLarge(sz int) *cmdError {
	return errorf(codeBSONObjectTooLarge, "BSONObjectTooLarge: change event of %d bytes exceeds the %d-byte document limit", sz, maxBSONSize)
}

// eventFragment is one fragment of a split change event.
type eventFragment struct {
	doc bson.Raw
	tok resumeToken
}

// fragmentBudget bounds a fragment, so that a reply holding one fragment and its envelope (the
// postBatchResumeToken, the cursor fields) stays under 16 MiB.
const fragmentBudget = replyBudget

// splitLargeEvent splits an encoded event over 16 MiB as $changeStreamSplitLargeEvent does: its
// top-level fields, in order, are packed greedily into fragments of at most fragmentBudget
// bytes; each fragment starts with its own resume token (_id, the event's token with the
// fragment number) and splitEvent {fragment, of}. A single field too large for a fragment fails
// the event with BSONObjectTooLarge (10334), as on a server: subdocuments are never split.
func splitLargeEvent(ev bson.Raw, tok resumeToken) ([]eventFragment, error) {
	elems, err := ev.Elements()
	if err != nil {
		return nil, err
	}
	// header returns the encoded _id and splitEvent elements of fragment i of n (same size for
	// every i and n: fixed-width token, int32 numbers).
	header := func(i, n int) []byte {
		ft := tok
		ft.fragment = uint32(i)
		b, _ := bson.Marshal(bson.D{{Key: "_id", Value: ft.doc()},
			{Key: "splitEvent", Value: bson.D{{Key: "fragment", Value: int32(i)}, {Key: "of", Value: int32(n)}}}})
		return b[4 : len(b)-1]
	}
	hdrSize := 4 + len(header(1, 1)) + 1
	var groups [][]bson.RawElement
	var cur []bson.RawElement
	size := hdrSize
	for _, el := range elems {
		if el.Key() == "_id" {
			continue
		}
		if hdrSize+len(el) > fragmentBudget {
			return nil, errEventTooLarge(len(ev))
		}
		if size+len(el) > fragmentBudget && len(cur) > 0 {
			groups = append(groups, cur)
			cur, size = nil, hdrSize
		}
		cur = append(cur, el)
		size += len(el)
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	out := make([]eventFragment, len(groups))
	for i, g := range groups {
		n := hdrSize
		for _, el := range g {
			n += len(el)
		}
		doc := make([]byte, 4, n)
		doc = append(doc, header(i+1, len(groups))...)
		for _, el := range g {
			doc = append(doc, el...)
		}
		doc = append(doc, 0)
		doc[0], doc[1], doc[2], doc[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		ft := tok
		ft.fragment = uint32(i + 1)
		out[i] = eventFragment{doc: doc, tok: ft}
	}
	return out, nil
}
