package mongosim

import (
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func init() {
	registerCommand(kindRead, cmdGetMore, "getMore")
	registerCommand(kindAdmin, cmdKillCursors, "killCursors")
}

// cursor is an open server-side cursor: a find/aggregate result or a change stream.
type cursor interface {
	// next returns the next batch of at most n documents (n <= 0: as many as fit in a reply).
	// It is called without engine.mu held and may block up to maxWait when the cursor awaits
	// data (change streams), returning early when c.ctx ends. extra is appended to the
	// reply's cursor document (postBatchResumeToken); done means the cursor is exhausted.
	next(c *command, n int, maxWait time.Duration) (batch []any, extra bson.D, done bool, err error)
	// namespace is the "db.coll" reported in cursor.ns.
	namespace() string
	// isChangeStream reports whether errors of this cursor get change-stream labels.
	isChangeStream() bool
	// close releases the cursor's resources (its hub registration).
	close()
}

type cursorEntry struct {
	cur      cursor
	lsid     *bson.Binary
	inUse    bool
	lastUsed time.Time // wall time of the last getMore (or creation), for the idle timeout
	// For currentOp: the command that opened the cursor, when, and what it has returned.
	origin          bson.D
	created         time.Time
	nDocs, nBatches int64
}

// cursorTable maps cursor ids to open cursors. Guarded by engine.mu.
type cursorTable struct {
	open       map[int64]*cursorEntry
	lastReaped time.Time
}

func (t *cursorTable) init() { t.open = make(map[int64]*cursorEntry) }

// reapIdleLocked closes cursors not used for Options.CursorTimeout, as a real server's cursor
// timeout does (cursorTimeoutMillis, 10 minutes), so abandoned cursors do not accumulate. It
// runs lazily, at most once a minute, from cursor creation. The caller closes the returned
// cursors after releasing e.mu.
func (e *engine) reapIdleLocked(now time.Time) []cursor {
	t := &e.cursors
	if now.Sub(t.lastReaped) < time.Minute {
		return nil
	}
	t.lastReaped = now
	var dead []cursor
	for id, ent := range t.open {
		if !ent.inUse && now.Sub(ent.lastUsed) > e.s.opts.CursorTimeout {
			delete(t.open, id)
			dead = append(dead, ent.cur)
		}
	}
	return dead
}

// registerCursor stores cur and returns its new id (a positive Int64, never reused).
func (e *engine) registerCursor(cur cursor, lsid *bson.Binary) int64 {
	now := e.s.opts.Now()
	e.mu.Lock()
	dead := e.reapIdleLocked(now)
	var id int64
	for {
		id = rand.Int64N(1<<62) + 1
		if _, taken := e.cursors.open[id]; !taken {
			e.cursors.open[id] = &cursorEntry{cur: cur, lsid: lsid, lastUsed: now}
			break
		}
	}
	e.mu.Unlock()
	for _, d := range dead {
		d.close()
	}
	return id
}

// firstBatch runs a new cursor's first batch and builds the reply's cursor document. The cursor
// is registered only when it is not exhausted, so an exhausted result reports id 0.
func (e *engine) firstBatch(c *command, cur cursor, batchSize int) (bson.D, error) {
	if batchSize < 0 {
		return nil, errorf(codeBadValue, "BSON field 'batchSize' value must be >= 0, actual value '%d'", batchSize)
	}
	n := batchSize
	if n == 0 {
		if _, set := batchSizeArg(c); set {
			n = -1 // batchSize: 0 asks for an empty first batch
		} else {
			n = 101
		}
	}
	var batch []any
	var extra bson.D
	var done bool
	var err error
	if n == -1 {
		batch, extra, done, err = cur.next(c, -1, 0)
	} else {
		batch, extra, done, err = cur.next(c, n, 0)
	}
	if err != nil {
		cur.close()
		return nil, err
	}
	var id int64
	if done {
		cur.close()
	} else {
		id = e.registerCursor(cur, c.LSID)
		e.mu.Lock()
		if ent := e.cursors.open[id]; ent != nil {
			ent.origin, ent.created, ent.nDocs, ent.nBatches = c.Body, ent.lastUsed, int64(len(batch)), 1
		}
		e.mu.Unlock()
	}
	return withAtClusterTime(c, cursorDoc("firstBatch", batch, extra, id, cur.namespace())), nil
}

// cursorIsChangeStream reports whether id names an open change-stream cursor.
func (e *engine) cursorIsChangeStream(id int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ent := e.cursors.open[id]
	return ent != nil && ent.cur.isChangeStream()
}

func batchSizeArg(c *command) (int64, bool) {
	if cv, ok := c.Arg("cursor"); ok {
		if cd, ok := cv.(bson.D); ok {
			if v, ok := lookupD(cd, "batchSize"); ok {
				n, _ := asInt64(v)
				return n, true
			}
		}
	}
	if v, ok := c.Arg("batchSize"); ok {
		n, _ := asInt64(v)
		return n, true
	}
	return 0, false
}

func cursorDoc(batchKey string, batch []any, extra bson.D, id int64, ns string) bson.D {
	if batch == nil {
		batch = []any{}
	}
	d := bson.D{{Key: batchKey, Value: bson.A(batch)}}
	d = append(d, extra...)
	d = append(d, bson.E{Key: "id", Value: id}, bson.E{Key: "ns", Value: ns})
	return bson.D{{Key: "cursor", Value: d}}
}

func cmdGetMore(s *Server, c *command) (bson.D, error) {
	idV := c.Body[0].Value
	id, ok := idV.(int64)
	if !ok {
		return nil, errorf(codeTypeMismatch, "Field 'getMore' must be of type long in: %v", idV)
	}
	coll, _ := c.Arg("collection")
	collName, ok := coll.(string)
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field 'getMore.collection' is missing but a required field")
	}
	var n int64
	if v, ok := c.Arg("batchSize"); ok {
		if n, ok = asInt64(v); !ok || n < 0 {
			return nil, errorf(codeBadValue, "BSON field 'batchSize' value must be >= 0")
		}
	}
	maxWait := time.Duration(-1)
	if v, ok := c.Arg("maxTimeMS"); ok {
		ms, ok := asInt64(v)
		if !ok || ms < 0 {
			return nil, errorf(codeBadValue, "BSON field 'maxTimeMS' value must be >= 0")
		}
		maxWait = time.Duration(ms) * time.Millisecond
	}

	e := s.eng
	e.mu.Lock()
	ent := e.cursors.open[id]
	if ent == nil {
		e.mu.Unlock()
		return nil, errorf(codeCursorNotFound, "cursor id %d not found", id)
	}
	if ns := ent.cur.namespace(); ns != c.DB+"."+collName {
		e.mu.Unlock()
		return nil, errorf(codeUnauthorized, "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s", c.DB, collName, ns)
	}
	if ent.inUse {
		e.mu.Unlock()
		return nil, errorf(codeCursorInUse, "cursor id %d is already in use", id)
	}
	ent.inUse = true
	ent.lastUsed = s.opts.Now()
	e.mu.Unlock()
	c.ChangeStream = ent.cur.isChangeStream()

	release := func(kill bool, returned int) {
		e.mu.Lock()
		ent.nDocs += int64(returned)
		ent.nBatches++
		if kill {
			delete(e.cursors.open, id)
		} else {
			ent.inUse = false
		}
		e.mu.Unlock()
		if kill {
			ent.cur.close()
		}
	}
	if ferr, closeConn := s.fp.evalGetMoreAfterCheckout(); closeConn || ferr != nil {
		release(false, 0)
		if closeConn {
			return nil, errCloseConnection
		}
		return nil, ferr
	}
	if maxWait < 0 {
		maxWait = s.opts.DefaultAwaitTime
	}
	batch, extra, done, err := ent.cur.next(c, int(n), maxWait)
	if err != nil {
		// A failed getMore kills the cursor on a real server.
		release(true, 0)
		return nil, err
	}
	release(done, len(batch))
	if done {
		id = 0
	}
	return cursorDoc("nextBatch", batch, extra, id, ent.cur.namespace()), nil
}

func cmdKillCursors(s *Server, c *command) (bson.D, error) {
	v, _ := c.Arg("cursors")
	ids, ok := v.(bson.A)
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field 'killCursors.cursors' is missing but a required field")
	}
	killed, notFound := bson.A{}, bson.A{}
	var toClose []cursor
	e := s.eng
	e.mu.Lock()
	for _, x := range ids {
		id, ok := x.(int64)
		if !ok {
			e.mu.Unlock()
			return nil, errorf(codeTypeMismatch, "BSON field 'killCursors.cursors' must be an array of longs")
		}
		if ent := e.cursors.open[id]; ent != nil {
			delete(e.cursors.open, id)
			toClose = append(toClose, ent.cur)
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	e.mu.Unlock()
	for _, cur := range toClose {
		cur.close()
	}
	return bson.D{{Key: "cursorsKilled", Value: killed}, {Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}}, {Key: "cursorsUnknown", Value: bson.A{}}}, nil
}

// staticCursor serves a result computed up front (find, aggregate, listIndexes, ...).
type staticCursor struct {
	ns   string
	docs []any // remaining documents
}

// newStaticCursor returns a cursor over docs; ns is reported in cursor.ns.
func newStaticCursor(ns string, docs []any) *staticCursor {
	return &staticCursor{ns: ns, docs: docs}
}

// replyBudget keeps a batch under the 16 MiB reply limit, with room for the envelope.
const replyBudget = maxBSONSize - 64*1024

func (sc *staticCursor) next(_ *command, n int, _ time.Duration) ([]any, bson.D, bool, error) {
	if n < 0 {
		return nil, nil, len(sc.docs) == 0, nil
	}
	size := 0
	i := 0
	for i < len(sc.docs) && (n == 0 || i < n) {
		sz := approxSize(sc.docs[i])
		if i > 0 && size+sz > replyBudget {
			break
		}
		size += sz
		i++
	}
	batch := sc.docs[:i:i]
	sc.docs = sc.docs[i:]
	return batch, nil, len(sc.docs) == 0, nil
}

func (sc *staticCursor) namespace() string    { return sc.ns }
func (sc *staticCursor) isChangeStream() bool { return false }

// close does nothing: a static cursor holds only immutable documents, and killCursors or
// endSessions may close it while a getMore still reads it (the next batch is computed under no
// lock the closer holds).
func (sc *staticCursor) close() {}

// approxSize returns the encoded size of a document (exact for bson.Raw, encoded otherwise).
func approxSize(v any) int {
	switch d := v.(type) {
	case bson.Raw:
		return len(d)
	default:
		b, err := bson.Marshal(d)
		if err != nil {
			return 0
		}
		return len(b)
	}
}
