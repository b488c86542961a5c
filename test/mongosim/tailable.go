package mongosim

import (
	"bytes"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// Codes of tailable cursors.
const (
	codeCappedPositionLost = 136
	codeQueryPlanKilled    = 175
)

// tailableCursor is a find with tailable (and maybe awaitData) on a capped collection: it
// returns the matching documents in natural order and stays open at the end, remembering the
// last document it scanned; a later getMore continues after it, and with awaitData waits for
// an insert. If that document is removed (the collection wrapped around, or a delete), the
// next getMore fails with CappedPositionLost (136), as on a server.
type tailableCursor struct {
	e        *engine
	db, coll string
	uuid     bson.Binary
	filter   *query.Filter
	env      *query.Env
	proj     bson.D
	await    bool
	lastKey  string // _id hash of the last document scanned; "" = before the first
}

// openTailable opens a tailable find on db.coll, which must be capped and non-empty (an
// empty one gives no cursor, since its position cannot be established, as on a server:
// ok is false then).
func (e *engine) openTailable(db, coll string, f *query.Filter, env *query.Env, proj bson.D, await bool) (*tailableCursor, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.collLocked(db, coll)
	if c == nil || c.count() == 0 {
		return nil, false
	}
	return &tailableCursor{e: e, db: db, coll: coll, uuid: c.uuid, filter: f, env: env, proj: proj, await: await}, true
}

func (tc *tailableCursor) namespace() string    { return tc.db + "." + tc.coll }
func (tc *tailableCursor) isChangeStream() bool { return false }
func (tc *tailableCursor) close()               {}

func (tc *tailableCursor) next(c *command, n int, maxWait time.Duration) ([]any, bson.D, bool, error) {
	if n < 0 {
		return nil, nil, false, nil // batchSize 0: an empty first batch, the cursor stays
	}
	deadline := time.Now().Add(maxWait)
	for {
		batch, wake, err := tc.scan(n)
		if err != nil || len(batch) > 0 || !tc.await || maxWait <= 0 {
			return batch, nil, false, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil, false, nil
		}
		_, closing := tc.e.hub.signals()
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		case <-c.ctx.Done():
		case <-closing:
		}
		t.Stop()
		if c.ctx.Err() != nil {
			return nil, nil, false, nil
		}
	}
}

// scan returns the matching documents after the cursor's position (at most n when n > 0) and
// moves the position to the last document scanned; wake is closed by the next insert.
func (tc *tailableCursor) scan(n int) ([]any, <-chan struct{}, error) {
	e := tc.e
	e.mu.Lock()
	defer e.mu.Unlock()
	coll := e.collLocked(tc.db, tc.coll)
	if coll == nil || !bytes.Equal(coll.uuid.Data, tc.uuid.Data) || coll.kind == nil {
		return nil, nil, errorf(codeQueryPlanKilled, "collection dropped")
	}
	start := 0
	if tc.lastKey != "" {
		pos, ok := coll.byID[tc.lastKey]
		if !ok {
			return nil, nil, errorf(codeCappedPositionLost, "CollectionScan died due to position in capped collection being deleted")
		}
		start = pos + 1
	}
	var out []any
	for _, s := range coll.docs[start:] {
		if s == nil {
			continue
		}
		tc.lastKey = s.key
		ok, err := tc.filter.Match(s.doc, tc.env)
		if err != nil {
			return nil, nil, qerrToCmd(err)
		}
		if !ok {
			continue
		}
		var d any = s.doc
		if len(tc.proj) > 0 {
			p, err := query.Project(s.doc, tc.proj, tc.env)
			if err != nil {
				return nil, nil, qerrToCmd(err)
			}
			d = p
		}
		out = append(out, d)
		if n > 0 && len(out) >= n {
			break
		}
	}
	return out, coll.kind.tailWake, nil
}

// wakeTailers wakes the tailable cursors waiting on capped coll. Caller holds e.mu.
func (coll *collection) wakeTailers() {
	close(coll.kind.tailWake)
	coll.kind.tailWake = make(chan struct{})
}

// checkTailableOptions refuses what a tailable find cannot combine with: a sort other than
// {$natural: 1} (as a server does), and skip, limit, singleBatch and returnKey, which
// mongosim does not implement on tailable cursors.
func checkTailableOptions(c *command, sortSpec bson.D, skip, limit int64, single, returnKey bool) *cmdError {
	if len(sortSpec) > 0 {
		if dir, ok := naturalSort(sortSpec); !ok || dir < 0 {
			return errorf(codeBadValue, "error processing query: ns=%s.%v: cannot use tailable option with a sort other than {$natural: 1}", c.DB, c.Body[0].Value)
		}
	}
	switch {
	case skip > 0 || limit > 0:
		return unsupported("skip or limit on tailable cursors")
	case single:
		return errorf(codeBadValue, "cannot use tailable option with the 'singleBatch' option")
	case returnKey:
		return unsupported("returnKey on tailable cursors")
	}
	return nil
}

// findTailable answers a tailable find on a capped collection.
func (s *Server) findTailable(c *command, coll string, filter, proj bson.D, await bool, batchSize int64) (bson.D, error) {
	env, err := readEnv(s, c)
	if err != nil {
		return nil, err
	}
	f, err := query.CompileFilter(filter)
	if err != nil {
		return nil, readQueryErr(err)
	}
	if len(proj) > 0 {
		if _, err := query.Project(bson.D{}, proj, env); err != nil {
			return nil, readQueryErr(err)
		}
	}
	cur, ok := s.eng.openTailable(c.DB, coll, f, env, proj, await)
	if !ok {
		return s.eng.firstBatch(c, newStaticCursor(c.DB+"."+coll, nil), int(batchSize))
	}
	return s.eng.firstBatch(c, cur, int(batchSize))
}
