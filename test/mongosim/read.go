package mongosim

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindRead, cmdFind, "find")
	registerCommand(kindRead, cmdCount, "count")
	registerCommand(kindRead, cmdDistinct, "distinct")
	registerCommand(kindRead, cmdAggregate, "aggregate")
}

// readQueryErr converts an error of the query package into the command error with the same
// code and message; other errors pass through.
func readQueryErr(err error) error {
	var qe *query.Error
	if errors.As(err, &qe) {
		return &cmdError{Code: qe.Code, Msg: qe.Msg}
	}
	return err
}

// readGenericFields are the fields any read command accepts besides its own (§2.1 of the
// reference); fields starting with '$' are always accepted.
var readGenericFields = map[string]bool{
	"lsid": true, "txnNumber": true, "autocommit": true, "startTransaction": true,
	"readConcern": true, "writeConcern": true, "maxTimeMS": true, "comment": true,
	"apiVersion": true, "apiStrict": true, "apiDeprecationErrors": true,
	"mayBypassWriteBlocking": true, "rawData": true, "readPreference": true,
	"databaseVersion": true, "shardVersion": true, "clientOperationKey": true,
	"maxTimeMSOpOnly": true, "usesDefaultMaxTimeMS": true,
}

// readCheckFields fails with 40415 on a field the command does not know, as a real server
// does; known lists the command's own fields.
func readCheckFields(c *command, known map[string]bool) error {
	for _, e := range c.Body[1:] {
		if strings.HasPrefix(e.Key, "$") || readGenericFields[e.Key] || known[e.Key] {
			continue
		}
		return errorf(40415, "BSON field '%s.%s' is an unknown field.", c.Name, e.Key)
	}
	return nil
}

// readDocArg returns the optional document field key ({} when absent or null).
func readDocArg(c *command, key string) (bson.D, error) {
	v, ok := c.Arg(key)
	if !ok || v == nil {
		return bson.D{}, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'", c.Name, key, typeName(v))
	}
	return d, nil
}

// readIntArg returns the optional integral field key, failing for non-numbers and, when
// nonNeg, for negative values (code 51024, as the server's IDL validators do).
func readIntArg(c *command, key string, nonNeg bool) (int64, bool, error) {
	v, ok := c.Arg(key)
	if !ok || v == nil {
		return 0, false, nil
	}
	n, ok := asInt64(v)
	if !ok {
		return 0, false, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", c.Name, key, typeName(v))
	}
	if nonNeg && n < 0 {
		return 0, false, errorf(51024, "BSON field '%s' value must be >= 0, actual value '%d'", key, n)
	}
	return n, true, nil
}

// readBoolArg returns the optional boolean field key (numbers count as booleans, as in the
// server's IDL).
func readBoolArg(c *command, key string) (bool, error) {
	v, ok := c.Arg(key)
	if !ok || v == nil {
		return false, nil
	}
	switch b := v.(type) {
	case bool:
		return b, nil
	case int32:
		return b != 0, nil
	case int64:
		return b != 0, nil
	case float64:
		return b != 0, nil
	}
	return false, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'bool'", c.Name, key, typeName(v))
}

// readMaxTimeArg validates maxTimeMS. The simulator accepts it: reads are computed in memory
// and never run long enough to expire.
func readMaxTimeArg(c *command) error {
	if v, ok := c.Arg("maxTimeMS"); ok && v != nil {
		n, ok := asInt64(v)
		if !ok || n < 0 {
			return errorf(codeBadValue, "%v is not a valid value for maxTimeMS", v)
		}
	}
	return nil
}

// readEnv builds the expression environment of one read: $$NOW, $$CLUSTER_TIME and the
// command's let variables, each evaluated once as a constant expression.
func readEnv(s *Server, c *command) (*query.Env, error) {
	env := &query.Env{Now: s.opts.Now(), ClusterTime: s.eng.clock.last()}
	let, err := readDocArg(c, "let")
	if err != nil {
		return nil, err
	}
	if len(let) > 0 {
		env.Vars = make(map[string]any, len(let))
		for _, e := range let {
			if e.Key == "" || !(e.Key[0] >= 'a' && e.Key[0] <= 'z' || e.Key[0] >= 0x80) {
				return nil, errorf(16867, "'%s' starts with an invalid character for a user variable name", e.Key)
			}
			v, err := query.Eval(e.Value, bson.D{}, env)
			if err != nil {
				return nil, readQueryErr(err)
			}
			env.Vars[e.Key] = v
		}
	}
	return env, nil
}

// readCollName returns the collection a command targets (its first value).
func readCollName(c *command) (string, error) {
	name, ok := c.Body[0].Value.(string)
	if !ok {
		return "", errorf(codeInvalidNamespace, "collection name has invalid type %s", typeName(c.Body[0].Value))
	}
	if name == "" {
		return "", errorf(codeInvalidNamespace, "Invalid namespace specified '%s.'", c.DB)
	}
	return name, nil
}

// readSnapshot returns the documents of db.coll in natural order, as the command sees them
// (inside a transaction: with the transaction's own writes), and whether the collection
// exists. Only the slice is built under e.mu: documents are immutable, so the caller filters,
// sorts and projects them after the lock is released. When filter is an equality on _id
// (beside other conditions or alone: rdIDPinned), only that document is returned (the caller
// still matches the whole filter). A read in a
// transaction that is unknown, aborted or committed fails as the transaction code says (251,
// 225, 256); startTransaction on a read starts the transaction.
func (e *engine) readSnapshot(c *command, db, coll string, filter bson.D) ([]bson.D, bool, error) {
	id, byID := rdIDPinned(filter)
	e.mu.Lock()
	defer e.mu.Unlock()
	col, oplog, isOplog, err := e.readViewLocked(c, db, coll)
	if col == nil && err == nil && !isOplog {
		if docs, ok, verr := e.viewDocsLocked(c, db, coll); ok { // a view (views.go)
			return docs, true, verr
		}
	}
	if col == nil || err != nil {
		return oplog, isOplog, err
	}
	if byID {
		if d, ok := col.findByID(id); ok {
			return []bson.D{d}, true, nil
		}
		return nil, true, nil
	}
	if ids, ok := rdIDSet(filter); ok {
		// {_id: {$in: [...]}}: point lookups in the _id index instead of a scan, returned in
		// natural order as the scan would return them (the caller still applies the filter).
		pos := make([]int, 0, len(ids))
		for _, id := range ids {
			if i, ok := col.byID[query.HashKey(id)]; ok {
				pos = append(pos, i)
			}
		}
		slices.Sort(pos)
		pos = slices.Compact(pos)
		docs := make([]bson.D, 0, len(pos))
		for _, i := range pos {
			if s := col.docs[i]; s != nil {
				docs = append(docs, s.doc)
			}
		}
		return docs, true, nil
	}
	docs := make([]bson.D, 0, col.count())
	col.scan(func(d bson.D) bool {
		docs = append(docs, d)
		return true
	})
	return docs, true, nil
}

// readViewLocked returns the collection a read command sees (inside a transaction: the
// transaction's view), or the documents of the oplog view, or neither when the collection does
// not exist. Caller holds e.mu.
func (e *engine) readViewLocked(c *command, db, coll string) (col *collection, oplog []bson.D, isOplog bool, err error) {
	e.touchSessionLocked(c)
	if isOplogView(db, coll) {
		return nil, e.oplogViewLocked(c), true, nil
	}
	if c.InTransaction() {
		t, cerr := e.txnForCommandLocked(c)
		if cerr != nil {
			return nil, nil, false, cerr
		}
		tv, cerr := t.viewFor(e, db, coll, false)
		if cerr != nil || tv == nil {
			return nil, nil, false, cerr // nil: no such collection (at the transaction's read time)
		}
		return tv.view, nil, false, nil
	} else if c.snapshot {
		ts, cerr := e.snapshotTimeLocked(c)
		if cerr != nil {
			return nil, nil, false, cerr
		}
		col, cerr := e.collectionAtLocked(db, coll, ts, false)
		if cerr != nil {
			return nil, nil, false, cerr
		}
		return col, nil, false, nil
	}
	return e.viewLocked(c, db, coll), nil, false, nil
}

// readIDOrdered is readSnapshot for a find sorted on _id alone (dir 1 or -1): it walks the
// ordered _id index over the _id range the filter allows, instead of scanning and sorting the
// collection, and returns the candidates already in sort order. When the filter is nothing but
// that range, at most max candidates are taken (max > 0); capped says so, and the caller reads
// again without the cap should fewer of them match than it needs. ok is false for the oplog
// view, which has no _id index (the caller falls back to readSnapshot).
func (e *engine) readIDOrdered(c *command, db, coll string, filter bson.D, dir int, max int64) (docs []bson.D, capped, ok bool, err error) {
	r := idRangeOf(filter)
	if !r.exact {
		max = 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	col, _, isOplog, err := e.readViewLocked(c, db, coll)
	if err != nil || isOplog {
		return nil, false, !isOplog, err
	}
	if col == nil {
		// A view has no _id index: the caller reads it through readSnapshot.
		return nil, false, e.userViewLocked(db, coll) == nil, nil
	}
	docs = col.idRangeDocs(r, dir, int(max))
	return docs, max > 0 && int64(len(docs)) == max, true, nil
}

// rdIDEquality reports whether filter is {_id: v} or {_id: {$eq: v}} for a v that can only
// equal a document's _id through the _id index (not an array, regex, null or operator
// document), and returns v.
func rdIDEquality(filter bson.D) (any, bool) {
	if len(filter) != 1 || filter[0].Key != "_id" {
		return nil, false
	}
	v := filter[0].Value
	if d, ok := v.(bson.D); ok && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 || d[0].Key != "$eq" {
			return nil, false
		}
		v = d[0].Value
	}
	switch t := v.(type) {
	case nil, bson.A, bson.Regex, bson.Undefined, bson.MinKey, bson.MaxKey:
		return nil, false
	case bson.D:
		if len(t) > 0 && strings.HasPrefix(t[0].Key, "$") {
			return nil, false
		}
	}
	return v, true
}

// rdIDPinned returns the _id value that filter pins by equality at its top level, alone or
// beside other conditions ({_id: v, expiresAt: {$gt: t}}): a server fetches that one document
// through the _id index and applies the rest of the filter to it, instead of scanning the
// collection. A filter with _id twice at the top level is left to the scan.
func rdIDPinned(filter bson.D) (any, bool) {
	var pin bson.D
	for _, e := range filter {
		if e.Key == "_id" {
			pin = append(pin, e)
		}
	}
	if len(pin) != 1 {
		return nil, false
	}
	return rdIDEquality(pin)
}

// rdIDSet returns the values of a filter {_id: {$in: [v, ...]}} whose values can each be
// looked up by equality in the _id index (no regex, array, null or operator document).
func rdIDSet(filter bson.D) ([]any, bool) {
	if len(filter) != 1 || filter[0].Key != "_id" {
		return nil, false
	}
	d, ok := filter[0].Value.(bson.D)
	if !ok || len(d) != 1 || d[0].Key != "$in" {
		return nil, false
	}
	vals, ok := d[0].Value.(bson.A)
	if !ok {
		return nil, false
	}
	for _, v := range vals {
		if _, ok := rdIDEquality(bson.D{{Key: "_id", Value: v}}); !ok {
			return nil, false
		}
	}
	return vals, true
}

// rdReverseNaturalHint reports whether the command hints {$natural: -1}: the one hint that
// changes a result (reverse insertion order). Other hints only choose an index and are
// accepted without effect.
func rdReverseNaturalHint(c *command) bool {
	h, _ := c.Arg("hint")
	d, ok := h.(bson.D)
	if !ok || len(d) != 1 || d[0].Key != "$natural" {
		return false
	}
	n, ok := asInt64(d[0].Value)
	return ok && n < 0
}

// readMatch returns the documents of docs matching f, in order, stopping after max matches
// when max > 0.
func readMatch(docs []bson.D, f *query.Filter, env *query.Env, max int64) ([]bson.D, error) {
	var out []bson.D
	for _, d := range docs {
		ok, err := f.Match(d, env)
		if err != nil {
			return nil, readQueryErr(err)
		}
		if ok {
			out = append(out, d)
			if max > 0 && int64(len(out)) >= max {
				break
			}
		}
	}
	return out, nil
}

// rdSingleBatchCursor returns one batch and is then exhausted (find singleBatch / FindOne).
type rdSingleBatchCursor struct{ *staticCursor }

func (sb rdSingleBatchCursor) next(c *command, n int, wait time.Duration) ([]any, bson.D, bool, error) {
	batch, extra, _, err := sb.staticCursor.next(c, n, wait)
	return batch, extra, true, err
}

var rdFindFields = map[string]bool{
	"filter": true, "projection": true, "sort": true, "hint": true, "skip": true, "limit": true,
	"batchSize": true, "singleBatch": true, "max": true, "min": true, "returnKey": true,
	"showRecordId": true, "tailable": true, "oplogReplay": true, "noCursorTimeout": true,
	"awaitData": true, "allowPartialResults": true, "collation": true, "allowDiskUse": true,
	"let": true, "readOnce": true, "term": true, "includeQueryStatsMetrics": true,
}

// cmdFind runs a find: filter, sort, skip, limit and projection are applied in that order
// over a snapshot of the collection, and the result is served by a static cursor whose first
// batch holds batchSize documents (default 101). limit bounds the whole result across
// getMores; singleBatch (or a FindOne) closes the cursor after the first batch. A missing
// collection gives an empty result. Options that would change the result and are not
// implemented (min, max, returnKey, showRecordId, non-simple collation) fail with a
// "mongosim does not support" error; tailable fails as on a non-capped collection.
func cmdFind(s *Server, c *command) (bson.D, error) {
	coll, err := readCollName(c)
	if err != nil {
		return nil, err
	}
	if err := readCheckFields(c, rdFindFields); err != nil {
		return nil, err
	}
	filter, err := readDocArg(c, "filter")
	if err != nil {
		return nil, err
	}
	proj, err := readDocArg(c, "projection")
	if err != nil {
		return nil, err
	}
	sortSpec, err := readDocArg(c, "sort")
	if err != nil {
		return nil, err
	}
	skip, _, err := readIntArg(c, "skip", true)
	if err != nil {
		return nil, err
	}
	limit, _, err := readIntArg(c, "limit", true)
	if err != nil {
		return nil, err
	}
	batchSize, _, err := readIntArg(c, "batchSize", true)
	if err != nil {
		return nil, err
	}
	single, err := readBoolArg(c, "singleBatch")
	if err != nil {
		return nil, err
	}
	returnKey, err := readBoolArg(c, "returnKey")
	if err != nil {
		return nil, err
	}
	if b, err := readBoolArg(c, "showRecordId"); err != nil {
		return nil, err
	} else if b {
		return nil, unsupported("find option showRecordId")
	}
	for _, name := range []string{"min", "max"} {
		if d, err := readDocArg(c, name); err != nil {
			return nil, err
		} else if len(d) > 0 {
			return nil, unsupported("find option %s", name)
		}
	}
	tailable, err := readBoolArg(c, "tailable")
	if err != nil {
		return nil, err
	}
	awaitData, err := readBoolArg(c, "awaitData")
	if err != nil {
		return nil, err
	}
	if awaitData && !tailable {
		return nil, errorf(codeFailedToParse, "Cannot set 'awaitData' without also setting 'tailable'")
	}
	if tailable {
		if s.eng.isCapped(c.DB, coll) { // collkind.go, tailable.go
			if err := checkTailableOptions(c, sortSpec, skip, limit, single, returnKey); err != nil {
				return nil, err
			}
			return s.findTailable(c, coll, filter, proj, awaitData, batchSize)
		}
		return nil, errorf(codeBadValue, "error processing query: ns=%s.%s: tailable cursor requested on non capped collection", c.DB, coll)
	}
	for _, name := range []string{"noCursorTimeout", "allowPartialResults", "allowDiskUse", "oplogReplay", "readOnce"} {
		if _, err := readBoolArg(c, name); err != nil {
			return nil, err
		}
	}
	col, err := s.readCollation(c, coll) // collation.go
	if err != nil {
		return nil, err
	}
	if err := readMaxTimeArg(c); err != nil {
		return nil, err
	}
	env, err := readEnv(s, c)
	if err != nil {
		return nil, err
	}
	env.Collate = col.keyFunc()
	f, err := query.CompileFilter(filter)
	if err != nil {
		return nil, readQueryErr(err)
	}
	if len(proj) > 0 {
		// Validate the projection even when nothing matches, as the server parses it up front.
		if _, err := query.Project(bson.D{}, proj, env); err != nil {
			return nil, readQueryErr(err)
		}
	}

	var keyPattern bson.D
	keyScan := false
	if returnKey {
		var kerr *cmdError
		if keyPattern, keyScan, kerr = s.eng.returnKeyPattern(c, c.DB, coll, filter, sortSpec); kerr != nil {
			return nil, kerr
		}
	}
	var max int64
	if limit > 0 {
		max = skip + limit
	}
	var out []bson.D
	sorted := false
	if col == nil { // the _id index orders and finds _id values binary
		if out, sorted, err = s.eng.findIDOrdered(c, coll, filter, sortSpec, f, env, max); err != nil {
			return nil, err
		}
	}
	if !sorted {
		snapFilter := filter
		if col != nil {
			snapFilter = nil // {_id: "a"} may match "A": no _id lookup
		}
		docs, _, err := s.eng.readSnapshot(c, c.DB, coll, snapFilter)
		if err != nil {
			return nil, err
		}
		reverseNatural := false
		if dir, ok := naturalSort(sortSpec); ok {
			sortSpec, reverseNatural = nil, dir < 0 // {$natural: ±1} is (reverse) insertion order
		}
		if len(sortSpec) == 0 && (reverseNatural || rdReverseNaturalHint(c)) {
			slices.Reverse(docs) // docs is this command's own slice
		}
		natMax := int64(0)
		if len(sortSpec) == 0 {
			natMax = max // natural order: stop scanning once enough documents matched
		}
		if out, err = readMatch(docs, f, env, natMax); err != nil {
			return nil, err
		}
	}
	if len(sortSpec) > 0 && !sorted {
		if err := query.SortDocsCollated(out, sortSpec, env.Collate); err != nil {
			return nil, readQueryErr(err)
		}
	}
	if skip >= int64(len(out)) {
		out = nil
	} else {
		out = out[skip:]
	}
	if limit > 0 && int64(len(out)) > limit {
		out = out[:limit]
	}
	res := make([]any, len(out))
	for i, d := range out {
		switch {
		case returnKey && keyScan:
			res[i] = bson.D{} // a collection scan has no index keys
			continue
		case returnKey:
			k, kerr := returnKeyDoc(d, keyPattern, filter, returnKeyReverse(keyPattern, sortSpec))
			if kerr != nil {
				return nil, kerr
			}
			res[i] = k
			continue
		}
		if len(proj) > 0 {
			p, err := query.Project(d, proj, env)
			if err != nil {
				return nil, readQueryErr(err)
			}
			res[i] = p
		} else {
			res[i] = d
		}
	}
	var cur cursor = newStaticCursor(c.DB+"."+coll, res)
	if single {
		cur = rdSingleBatchCursor{cur.(*staticCursor)}
	}
	return s.eng.firstBatch(c, cur, int(batchSize))
}

// findIDOrdered serves a find whose sort is {_id: 1} or {_id: -1} from the ordered _id index,
// as a server's planner does: the matching documents in sort order, the first max of them when
// max > 0. sorted is false when the sort is another one (or the namespace has no _id index):
// the caller then scans and sorts.
func (e *engine) findIDOrdered(c *command, coll string, filter, sortSpec bson.D, f *query.Filter, env *query.Env, max int64) ([]bson.D, bool, error) {
	dir, ok := idSortDir(sortSpec)
	if !ok {
		return nil, false, nil
	}
	docs, capped, ok, err := e.readIDOrdered(c, c.DB, coll, filter, dir, max)
	if err != nil || !ok {
		return nil, false, err
	}
	out, err := readMatch(docs, f, env, max)
	if err != nil {
		return nil, false, err
	}
	if capped && int64(len(out)) < max {
		// A candidate of the exact range did not match (a NaN _id): read the whole range.
		if docs, _, _, err = e.readIDOrdered(c, c.DB, coll, filter, dir, 0); err != nil {
			return nil, false, err
		}
		if out, err = readMatch(docs, f, env, max); err != nil {
			return nil, false, err
		}
	}
	return out, true, nil
}

// codeOperationNotSupportedInTransaction is the server's code for commands a transaction may
// not run (count).
const codeOperationNotSupportedInTransaction = 263

var rdCountFields = map[string]bool{
	"query": true, "skip": true, "limit": true, "hint": true, "collation": true, "fields": true,
}

// cmdCount counts the documents matching query after skip, up to limit (a negative limit
// counts as its absolute value, as on a real server). A missing collection counts 0;
// estimatedDocumentCount sends {count: coll} alone.
func cmdCount(s *Server, c *command) (bson.D, error) {
	coll, err := readCollName(c)
	if err != nil {
		return nil, err
	}
	if err := readCheckFields(c, rdCountFields); err != nil {
		return nil, err
	}
	if c.InTransaction() {
		return nil, errorf(codeOperationNotSupportedInTransaction, "Cannot run 'count' in a multi-document transaction.")
	}
	filter, err := readDocArg(c, "query")
	if err != nil {
		return nil, err
	}
	skip, _, err := readIntArg(c, "skip", false)
	if err != nil {
		return nil, err
	}
	if skip < 0 {
		return nil, errorf(codeBadValue, "skip value is negative in count query")
	}
	limit, _, err := readIntArg(c, "limit", false)
	if err != nil {
		return nil, err
	}
	if limit < 0 {
		limit = -limit
	}
	col, err := s.readCollation(c, coll)
	if err != nil {
		return nil, err
	}
	if err := readMaxTimeArg(c); err != nil {
		return nil, err
	}
	env := &query.Env{Now: s.opts.Now(), ClusterTime: s.eng.clock.last(), Collate: col.keyFunc()}
	f, err := query.CompileFilter(filter)
	if err != nil {
		return nil, readQueryErr(err)
	}
	snapFilter := filter
	if col != nil {
		snapFilter = nil // no _id lookup: {_id: "a"} may match "A"
	}
	var total int64
	if len(filter) == 0 {
		// estimatedDocumentCount and unfiltered counts: the collection's size, no scan.
		s.eng.mu.Lock()
		s.eng.touchSessionLocked(c)
		if col := s.eng.collLocked(c.DB, coll); col != nil {
			total = int64(col.count())
		}
		isView := s.eng.userViewLocked(c.DB, coll) != nil
		s.eng.mu.Unlock()
		if isView {
			docs, _, err := s.eng.readSnapshot(c, c.DB, coll, filter)
			if err != nil {
				return nil, err
			}
			total = int64(len(docs))
		}
	} else {
		docs, _, err := s.eng.readSnapshot(c, c.DB, coll, snapFilter)
		if err != nil {
			return nil, err
		}
		var max int64
		if limit > 0 {
			max = skip + limit
		}
		out, err := readMatch(docs, f, env, max)
		if err != nil {
			return nil, err
		}
		total = int64(len(out))
	}
	n := total - skip
	if n < 0 {
		n = 0
	}
	if limit > 0 && n > limit {
		n = limit
	}
	return bson.D{{Key: "n", Value: rdNumber(n)}}, nil
}

// rdNumber returns n as int32 when it fits, as the server's appendNumber does.
func rdNumber(n int64) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return n
}

var rdDistinctFields = map[string]bool{"key": true, "query": true, "collation": true, "hint": true}

// cmdDistinct returns the distinct values of key among the documents matching query, sorted in
// BSON order. Dotted keys descend into embedded documents and through arrays of documents; an
// array at the end of the path contributes its elements. Equal values of different numeric
// types count once.
func cmdDistinct(s *Server, c *command) (bson.D, error) {
	coll, err := readCollName(c)
	if err != nil {
		return nil, err
	}
	if err := readCheckFields(c, rdDistinctFields); err != nil {
		return nil, err
	}
	kv, ok := c.Arg("key")
	if !ok {
		return nil, errorf(40414, "BSON field 'distinct.key' is missing but a required field")
	}
	key, ok := kv.(string)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'distinct.key' is the wrong type '%s', expected type 'string'", typeName(kv))
	}
	filter, err := readDocArg(c, "query")
	if err != nil {
		return nil, err
	}
	col, err := s.readCollation(c, coll)
	if err != nil {
		return nil, err
	}
	if err := readMaxTimeArg(c); err != nil {
		return nil, err
	}
	env := &query.Env{Now: s.opts.Now(), ClusterTime: s.eng.clock.last(), Collate: col.keyFunc()}
	f, err := query.CompileFilter(filter)
	if err != nil {
		return nil, readQueryErr(err)
	}
	snapFilter := filter
	if col != nil {
		snapFilter = nil
	}
	docs, _, err := s.eng.readSnapshot(c, c.DB, coll, snapFilter)
	if err != nil {
		return nil, err
	}
	out, err := readMatch(docs, f, env, 0)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(key, ".")
	seen := make(map[string]bool)
	values := bson.A{}
	for _, d := range out {
		rdDistinctValues(d, parts, func(v any) {
			h := query.HashKey(query.CollateValue(v, env.Collate))
			if !seen[h] {
				seen[h] = true
				values = append(values, v)
			}
		})
	}
	if env.Collate != nil {
		slices.SortStableFunc(values, func(a, b any) int {
			return query.Compare(query.CollateValue(a, env.Collate), query.CollateValue(b, env.Collate))
		})
	} else {
		rdSortValues(values)
	}
	return withAtClusterTime(c, bson.D{{Key: "values", Value: values}}), nil
}

// rdDistinctValues calls add for every value at the dotted path parts of v: arrays met on the
// way are traversed element by element (or indexed by a numeric part), and an array at the end
// of the path contributes its elements.
func rdDistinctValues(v any, parts []string, add func(any)) {
	if len(parts) == 0 {
		if arr, ok := v.(bson.A); ok {
			for _, x := range arr {
				add(x)
			}
			return
		}
		add(v)
		return
	}
	switch t := v.(type) {
	case bson.D:
		if sub, ok := lookupD(t, parts[0]); ok {
			rdDistinctValues(sub, parts[1:], add)
		}
	case bson.A:
		if i, err := strconv.Atoi(parts[0]); err == nil && i >= 0 {
			if i < len(t) {
				rdDistinctValues(t[i], parts[1:], add)
			}
			return
		}
		for _, x := range t {
			if d, ok := x.(bson.D); ok {
				rdDistinctValues(d, parts, add)
			}
		}
	}
}

// rdSortValues sorts distinct values in BSON order (query.Compare), as the server's
// ordered value set returns them.
func rdSortValues(values bson.A) {
	slices.SortStableFunc(values, query.Compare)
}

var rdAggregateFields = map[string]bool{
	"pipeline": true, "cursor": true, "explain": true, "allowDiskUse": true,
	"bypassDocumentValidation": true, "collation": true, "hint": true, "let": true,
	"fromMongos": true, "needsMerge": true, "isMapReduceCommand": true,
}

// cmdAggregate runs an aggregation pipeline over a snapshot of the collection and serves the
// result through a static cursor (cursor.batchSize as the first batch size, default 101).
// A $changeStream pipeline is handed whole to the change-stream implementation. The cursor
// option is required, as on a real server. A final $out or $merge writes the result instead
// (aggout.go). Explain, database-level aggregation (aggregate: 1) other than the sources below
// and non-simple collations are not supported.
func cmdAggregate(s *Server, c *command) (bson.D, error) {
	if c.ChangeStream {
		return rdAggregateChangeStream(s, c)
	}
	if reply, handled, err := aggregateSpecial(s, c); handled { // aggstages.go
		return reply, err
	}
	if err := readCheckFields(c, rdAggregateFields); err != nil {
		return nil, err
	}
	pv, ok := c.Arg("pipeline")
	if !ok {
		return nil, errorf(40414, "BSON field 'aggregate.pipeline' is missing but a required field")
	}
	pipeline, ok := pv.(bson.A)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'", typeName(pv))
	}
	if explain, err := readBoolArg(c, "explain"); err != nil {
		return nil, err
	} else if explain {
		return nil, unsupported("aggregate explain")
	}
	cv, ok := c.Arg("cursor")
	if !ok {
		return nil, errorf(codeFailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	if _, ok := cv.(bson.D); !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'aggregate.cursor' is the wrong type '%s', expected type 'object'", typeName(cv))
	}
	batchSize, _ := batchSizeArg(c)
	if batchSize < 0 {
		return nil, errorf(51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", batchSize)
	}
	for i, st := range pipeline {
		sd, ok := st.(bson.D)
		if !ok || len(sd) != 1 {
			return nil, errorf(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		if searchStages[sd[0].Key] {
			return nil, errSearchNotEnabled()
		}
		switch sd[0].Key {
		case "$changeStream":
			if i > 0 {
				return nil, errorf(40602, "$changeStream is only valid as the first stage in a pipeline")
			}
		case "$documents", "$listLocalSessions":
			if i > 0 {
				return nil, errorf(40602, "%s is only valid as the first stage in a pipeline", sd[0].Key)
			}
			if n, isNum := asInt64(c.Body[0].Value); !isNum || n != 1 {
				return nil, errorf(codeInvalidNamespace, "%s must be run against a database, with {aggregate: 1}, not a collection", sd[0].Key)
			}
		case "$currentOp", "$listSessions", "$collStats",
			"$indexStats", "$planCacheStats", "$lookup", "$graphLookup", "$unionWith", "$facet":
			return nil, unsupported("the %s aggregation stage", sd[0].Key)
		}
	}
	coll, ok := c.Body[0].Value.(string)
	if !ok {
		if n, isNum := asInt64(c.Body[0].Value); isNum && n == 1 && len(pipeline) > 0 {
			if src := pipeline[0].(bson.D)[0].Key; src == "$documents" || src == "$listLocalSessions" {
				return cmdAggregateSource(s, c, pipeline, int(batchSize))
			}
		}
		if n, isNum := asInt64(c.Body[0].Value); isNum && n == 1 {
			return nil, unsupported("database-level aggregate (aggregate: 1) other than change streams, $documents and $listLocalSessions")
		}
		return nil, errorf(codeInvalidNamespace, "Invalid {aggregate: %v} namespace", c.Body[0].Value)
	}
	if coll == "" {
		return nil, errorf(codeInvalidNamespace, "Invalid namespace specified '%s.'", c.DB)
	}
	if _, err := readBoolArg(c, "allowDiskUse"); err != nil {
		return nil, err
	}
	col, err := s.readCollation(c, coll)
	if err != nil {
		return nil, err
	}
	if err := readMaxTimeArg(c); err != nil {
		return nil, err
	}
	env, err := readEnv(s, c)
	if err != nil {
		return nil, err
	}
	env.Collate = col.keyFunc()
	pipeline, outStage, oerr := splitOutStage(pipeline, c.DB) // aggout.go
	if oerr != nil {
		return nil, oerr
	}
	p, err := query.CompilePipeline(pipeline)
	if err != nil {
		return nil, readQueryErr(err)
	}
	docs, _, err := s.eng.readSnapshot(c, c.DB, coll, nil)
	if err != nil {
		return nil, err
	}
	out, err := p.Run(docs, env)
	if err != nil {
		return nil, readQueryErr(err)
	}
	if outStage != nil {
		return s.writeAggOutput(c, outStage, out)
	}
	res := make([]any, len(out))
	for i, d := range out {
		res[i] = d
	}
	return s.eng.firstBatch(c, newStaticCursor(c.DB+"."+coll, res), int(batchSize))
}

// rdAggregateChangeStream hands a $changeStream aggregate, whole, to the change-stream
// implementation (changestream.go).
func rdAggregateChangeStream(s *Server, c *command) (bson.D, error) {
	if name, ok := c.Body[0].Value.(string); ok {
		s.eng.mu.Lock()
		err := s.eng.viewWriteErrorLocked(c.DB, name)
		s.eng.mu.Unlock()
		if err != nil {
			return nil, errorf(codeCommandNotSupportedOnView, "$changeStream cannot run on view %s.%s", c.DB, name)
		}
	}
	return cmdAggregateChangeStream(s, c)
}

// cmdAggregateSource runs a database-level aggregate whose first stage makes the documents:
// $documents (an array expression of objects) or $listLocalSessions (the sessions this server
// holds, as {_id: {id, uid}, lastUse}; without authentication every session is the unnamed
// user's, whose uid is the SHA-256 of the empty user name). The rest of the pipeline runs over
// them.
func cmdAggregateSource(s *Server, c *command, pipeline bson.A, batchSize int) (bson.D, error) {
	col, err := s.readCollation(c, "")
	if err != nil {
		return nil, err
	}
	env, err := readEnv(s, c)
	if err != nil {
		return nil, err
	}
	env.Collate = col.keyFunc()
	first := pipeline[0].(bson.D)[0]
	var docs []bson.D
	switch first.Key {
	case "$documents":
		v, err := query.Eval(first.Value, bson.D{}, env)
		if err != nil {
			return nil, readQueryErr(err)
		}
		arr, ok := v.(bson.A)
		if !ok {
			return nil, errorf(5858203, "an array is expected as the argument of $documents, got %s", typeName(v))
		}
		for _, x := range arr {
			d, ok := x.(bson.D)
			if !ok {
				return nil, errorf(5858203, "every element of $documents must be an object, got %s", typeName(x))
			}
			docs = append(docs, d)
		}
	case "$listLocalSessions":
		spec, ok := first.Value.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "$listLocalSessions must take a document, got %s", typeName(first.Value))
		}
		for _, f := range spec {
			switch f.Key {
			case "allUsers", "users":
			default:
				return nil, errorf(40415, "BSON field '$listLocalSessions.%s' is an unknown field.", f.Key)
			}
		}
		docs = s.eng.localSessions(c)
	}
	rest, outStage, oerr := splitOutStage(pipeline[1:], c.DB) // aggout.go
	if oerr != nil {
		return nil, oerr
	}
	p, err := query.CompilePipeline(rest)
	if err != nil {
		return nil, readQueryErr(err)
	}
	out, err := p.Run(docs, env)
	if err != nil {
		return nil, readQueryErr(err)
	}
	if outStage != nil {
		return s.writeAggOutput(c, outStage, out)
	}
	res := make([]any, len(out))
	for i, d := range out {
		res[i] = d
	}
	return s.eng.firstBatch(c, newStaticCursor(c.DB+".$cmd.aggregate", res), batchSize)
}

// emptyUserUID is the uid of sessions of an unauthenticated client: SHA-256 of "".
var emptyUserUID = func() []byte {
	sum := sha256.Sum256(nil)
	return sum[:]
}()

// localSessions returns the $listLocalSessions documents, ordered by session id.
func (e *engine) localSessions(c *command) []bson.D {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.touchSessionLocked(c) // the session running the stage is one of them
	keys := make([]string, 0, len(e.sessions.m))
	for k := range e.sessions.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	docs := make([]bson.D, 0, len(keys))
	for _, k := range keys {
		st := e.sessions.m[k]
		docs = append(docs, bson.D{
			{Key: "_id", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte(k)}},
				{Key: "uid", Value: bson.Binary{Subtype: 0, Data: emptyUserUID}}}},
			{Key: "lastUse", Value: bson.NewDateTimeFromTime(st.lastUse)},
		})
	}
	return docs
}
