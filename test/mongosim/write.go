package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindWrite, cmdInsert, "insert")
	registerCommand(kindWrite, cmdUpdate, "update")
	registerCommand(kindWrite, cmdDelete, "delete")
}

// Codes of document validation failures.
const (
	codeBSONObjectTooLarge = 10334
	codeDocTooLargeUpdate  = 17419
)

// writeCtx is the state of one write command: where its writes go (the committed catalog,
// or a transaction's views) and the expression environment. Used under e.mu.
type writeCtx struct {
	e    *engine
	c    *command
	db   string
	name string
	txn  *transaction // nil outside a multi-document transaction
	env  *query.Env
	// blockedBy is the open transaction a write outside transactions must wait for, set
	// with errTxnBlocked (txnwait.go).
	blockedBy *transaction

	// Retryable-write statements (retrywrite.go).
	fpArmed  bool                // onPrimaryTransactionalWrite may fire on this write
	fpFailed bool                // it failed a statement without closing the connection
	pending  []*oplogEntry       // the current statement's entries, logged at its commit
	undo     []undoRec           // how to roll the current statement back
	history  map[int]stmtOutcome // statements a previous attempt executed (nil: none)
}

// newWriteCtxLocked prepares a write to db.name: it resolves the command's transaction and
// its let variables. Caller holds e.mu.
func (e *engine) newWriteCtxLocked(c *command, name string) (*writeCtx, *cmdError) {
	w := &writeCtx{e: e, c: c, db: c.DB, name: name}
	if c.InTransaction() {
		t, err := e.txnForCommandLocked(c)
		if err != nil {
			return nil, err
		}
		w.txn = t
	} else if c.RetryableWrite() {
		if err := e.retryableVsTxnLocked(c); err != nil {
			return nil, err
		}
	}
	w.armFailPoint()
	env, err := e.commandEnvLocked(c)
	if err != nil {
		return nil, err
	}
	w.env = env
	return w, nil
}

// commandEnvLocked builds the expression environment of a command: $$NOW, $$CLUSTER_TIME
// and its let variables (each evaluated once). Caller holds e.mu.
func (e *engine) commandEnvLocked(c *command) (*query.Env, *cmdError) {
	env := &query.Env{Now: e.s.opts.Now(), ClusterTime: e.clock.last()}
	if lv, ok := c.Arg("let"); ok && lv != nil {
		ld, ok := lv.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'let' is the wrong type '%s', expected type 'object'", typeName(lv))
		}
		env.Vars = make(map[string]any, len(ld))
		for _, f := range ld {
			v, err := query.Eval(f.Value, bson.D{}, env)
			if err != nil {
				return nil, qerrToCmd(err)
			}
			env.Vars[f.Key] = v
		}
	}
	return env, nil
}

// target returns the collection the write reads and modifies: the transaction's view inside a
// transaction, else the committed collection. When create is true a missing collection is
// created (implicitly, as a real server does on the first write); otherwise nil is returned.
func (w *writeCtx) target(create bool) (*collection, *cmdError) {
	if w.txn != nil {
		if w.e.collLocked(w.db, w.name) == nil {
			if err := w.e.viewWriteErrorLocked(w.db, w.name); err != nil {
				return nil, err
			}
		}
		tv, err := w.txn.viewFor(w.e, w.db, w.name, create)
		if err != nil || tv == nil {
			return nil, err
		}
		return tv.view, nil
	}
	if isOplogView(w.db, w.name) {
		return nil, errorf(codeInvalidNamespace, "cannot write to '%s.%s'", w.db, w.name)
	}
	coll := w.e.collLocked(w.db, w.name)
	if coll == nil {
		if err := w.e.viewWriteErrorLocked(w.db, w.name); err != nil {
			return nil, err
		}
	}
	if coll == nil && create {
		if err := validCollName(w.db, w.name); err != nil {
			return nil, err
		}
		coll = newCollection(w.db, w.name)
		w.e.addCollectionLocked(coll, nil)
	}
	return coll, nil
}

// record logs one document write: outside a transaction at once, with its own cluster time
// (at the statement's commit while the retryable-write fail point is armed); inside one as a
// pending operation applied at commit. prev is the version the write replaced (nil: none).
func (w *writeCtx) record(coll *collection, kind, key string, slot, prev *docSlot, entry *oplogEntry) {
	entry.db, entry.coll, entry.collUUID = coll.db, coll.name, coll.uuid
	if w.txn != nil {
		w.txn.ops = append(w.txn.ops, txnOp{kind: kind, db: coll.db, coll: coll.name, key: key, slot: slot, entry: entry})
		return
	}
	entry.setVersion(key, prev)
	if w.fpArmed {
		w.noteWrite(coll, key, prev)
		w.pending = append(w.pending, entry)
		return
	}
	entry.ts = w.e.clock.tick()
	w.e.logLocked(entry)
}

// touch checks, inside a transaction, that the document key of coll was not changed by
// anyone else since the transaction first touched it (WriteConflict otherwise).
func (w *writeCtx) touch(key string) *cmdError {
	if w.txn == nil {
		return nil
	}
	return w.txn.touch(w.e, w.db, w.name, key)
}

// insertDoc inserts a validated document (from prepareInsert).
func (w *writeCtx) insertDoc(coll *collection, doc bson.D, size int) *cmdError {
	id := doc[0].Value
	s := &docSlot{doc: doc, key: query.HashKey(id), size: size}
	if err := w.checkNotHeld(s.key); err != nil {
		return err
	}
	if err := w.touch(s.key); err != nil {
		return err
	}
	if coll.kind != nil {
		if err := w.checkInsertKind(coll, doc); err != nil { // collkind.go
			return err
		}
	}
	if err := coll.insertSlot(s); err != nil {
		return err
	}
	w.record(coll, "insert", s.key, s, nil, &oplogEntry{op: "insert", docKey: bson.D{{Key: "_id", Value: id}}, doc: doc})
	if coll.kind != nil && coll.kind.capped {
		w.trimCapped(coll)
		coll.wakeTailers() // tailable.go
	}
	return nil
}

// replaceDoc stores the result of an update of old.
func (w *writeCtx) replaceDoc(coll *collection, old *docSlot, res *query.UpdateResult, size int) *cmdError {
	if err := w.touch(old.key); err != nil {
		return err
	}
	if coll.kind != nil {
		if err := w.validate(coll, res.Doc, old.doc); err != nil { // validator.go
			return err
		}
	}
	s := &docSlot{doc: res.Doc, key: old.key, size: size}
	if err := coll.replaceSlot(s); err != nil {
		return err
	}
	en := &oplogEntry{docKey: bson.D{{Key: "_id", Value: docID(res.Doc)}}}
	if res.Replacement {
		en.op, en.doc = "replace", res.Doc
	} else {
		en.op = "update"
		en.updateDesc = oplogUpdateDesc(res)
	}
	if coll.preAndPostImages {
		en.pre, en.post = old.doc, res.Doc
	}
	w.record(coll, en.op, s.key, s, old, en)
	return nil
}

// deleteDoc removes a document.
func (w *writeCtx) deleteDoc(coll *collection, old *docSlot) *cmdError {
	if err := w.touch(old.key); err != nil {
		return err
	}
	coll.removeSlot(old.key)
	en := &oplogEntry{op: "delete", docKey: bson.D{{Key: "_id", Value: docID(old.doc)}}}
	if coll.preAndPostImages {
		en.pre = old.doc
	}
	w.record(coll, "delete", old.key, nil, old, en)
	return nil
}

// oplogUpdateDesc is the change-stream updateDescription of an update.
func oplogUpdateDesc(res *query.UpdateResult) bson.D {
	updated := res.UpdatedFields
	if updated == nil {
		updated = bson.D{}
	}
	removed := bson.A{}
	for _, f := range res.RemovedFields {
		removed = append(removed, f)
	}
	trunc := bson.A{}
	for _, t := range res.TruncatedArrays {
		trunc = append(trunc, bson.D{{Key: "field", Value: t.Field}, {Key: "newSize", Value: int32(t.NewSize)}})
	}
	return bson.D{{Key: "updatedFields", Value: updated}, {Key: "removedFields", Value: removed},
		{Key: "truncatedArrays", Value: trunc}}
}

// prepareInsert validates a document to insert and returns it with _id first (generated as an
// ObjectID when absent) and its encoded size.
func prepareInsert(v any) (bson.D, int, *cmdError) {
	doc, ok := v.(bson.D)
	if !ok {
		return nil, 0, errorf(codeTypeMismatch, "BSON field 'insert.documents' must be an array of objects, but found %s", typeName(v))
	}
	// Since 5.0 a server stores $-prefixed field names, top-level and nested; only _id may not
	// contain any (checkID).
	idx := -1
	for i, f := range doc {
		if f.Key == "_id" && idx < 0 {
			idx = i
		}
	}
	switch {
	case idx < 0:
		nd := make(bson.D, 0, len(doc)+1)
		nd = append(nd, bson.E{Key: "_id", Value: bson.NewObjectID()})
		doc = append(nd, doc...)
	case idx > 0:
		nd := make(bson.D, 0, len(doc))
		nd = append(nd, doc[idx])
		nd = append(nd, doc[:idx]...)
		doc = append(nd, doc[idx+1:]...)
	}
	if err := checkID(doc[0].Value); err != nil {
		return nil, 0, err
	}
	size, err := docSize(doc)
	if err != nil {
		return nil, 0, err
	}
	if size > maxBSONSize {
		return nil, 0, errorf(codeBSONObjectTooLarge, "object to insert too large. size in bytes: %d, max size: %d", size, maxBSONSize)
	}
	return doc, size, nil
}

// checkID rejects _id values a server refuses to store.
func checkID(id any) *cmdError {
	switch x := id.(type) {
	case bson.A:
		return errorf(codeInvalidIdField, "The '_id' value cannot be of type array")
	case bson.Regex:
		return errorf(codeBadValue, "can't use a regex for _id")
	case bson.Undefined:
		return errorf(codeBadValue, "can't use a undefined for _id")
	case bson.D:
		if f := dollarField(x); f != "" {
			return errorf(codeDollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", f)
		}
	}
	return nil
}

// dollarField returns the first $-prefixed field name in d or its subdocuments, or "".
func dollarField(d bson.D) string {
	for _, e := range d {
		if strings.HasPrefix(e.Key, "$") {
			return e.Key
		}
		if sub, ok := e.Value.(bson.D); ok {
			if f := dollarField(sub); f != "" {
				return f
			}
		}
	}
	return ""
}

func docSize(doc bson.D) (int, *cmdError) {
	b, err := bson.Marshal(doc)
	if err != nil {
		return 0, errorf(codeBadValue, "cannot encode document: %v", err)
	}
	return len(b), nil
}

// idEquality returns the _id value a filter pins by equality ({_id: v} or {_id: {$eq: v}}),
// for the by-_id fast path. The full filter is still applied to the candidate.
func idEquality(q bson.D) (any, bool) {
	v, ok := lookupD(q, "_id")
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case bson.D:
		if len(x) == 1 && x[0].Key == "$eq" {
			v = x[0].Value
		} else if len(x) > 0 && strings.HasPrefix(x[0].Key, "$") {
			return nil, false
		}
	}
	switch v.(type) {
	case bson.Regex, bson.A:
		return nil, false
	}
	return v, true
}

// matching returns the slots of coll that match the filter, in natural order; at most one
// when one is true.
func (w *writeCtx) matching(coll *collection, q bson.D, f *query.Filter, one bool, env *query.Env) ([]*docSlot, *cmdError) {
	var out []*docSlot
	var merr *cmdError
	test := func(s *docSlot) bool {
		ok, err := f.Match(s.doc, env)
		if err != nil {
			merr = qerrToCmd(err)
			return false
		}
		if ok {
			out = append(out, s)
			return !one
		}
		return true
	}
	if id, ok := idEquality(q); ok && env.Collate == nil {
		if s := coll.slot(query.HashKey(id)); s != nil {
			test(s)
		}
		return out, merr
	}
	coll.scanSlots(test)
	return out, merr
}

// pickSorted returns the first of slots in sort order (strings compared under col).
func pickSorted(slots []*docSlot, sortSpec bson.D, col query.Collate) (*docSlot, *cmdError) {
	if len(slots) <= 1 {
		if len(slots) == 0 {
			return nil, nil
		}
		return slots[0], nil
	}
	docs := make([]bson.D, len(slots))
	byDoc := make(map[string]*docSlot, len(slots))
	for i, s := range slots {
		docs[i] = s.doc
		byDoc[s.key] = s
	}
	if err := query.SortDocsCollated(docs, sortSpec, col); err != nil {
		return nil, qerrToCmd(err)
	}
	return byDoc[query.HashKey(docID(docs[0]))], nil
}

// updateSpec is one update statement (of update or findAndModify).
type updateSpec struct {
	q            bson.D
	u            any
	upsert       bool
	multi        bool
	arrayFilters bson.A
	sort         bson.D
	constants    bson.D    // c: variables of a pipeline update, in addition to let
	hint         writeHint // the index the statement reads through (writehint.go)
	collation    any       // the statement's collation argument (collation.go)
	hasCollation bool
}

// updateOutcome is what one update statement did.
type updateOutcome struct {
	matched    int
	modified   int
	upserted   bool
	upsertedID any
	pre, post  bson.D // the first matched document before and after (findAndModify)
}

// update runs one update statement.
func (w *writeCtx) update(sp updateSpec) (*updateOutcome, *cmdError) {
	f, err := query.CompileFilter(sp.q)
	if err != nil {
		return nil, qerrToCmd(err)
	}
	if sp.multi && isReplacement(sp.u) {
		return nil, errorf(codeFailedToParse, "multi update is not supported for replacement-style update")
	}
	env := w.env
	if len(sp.constants) > 0 {
		cp := *env
		cp.Vars = make(map[string]any, len(env.Vars)+len(sp.constants))
		for k, v := range env.Vars {
			cp.Vars[k] = v
		}
		for _, f := range sp.constants {
			cp.Vars[f.Key] = f.Value
		}
		env = &cp
	}
	opts := query.UpdateOptions{ArrayFilters: sp.arrayFilters, Env: env, Query: sp.q}
	if err := query.ValidateUpdateOptions(sp.u, opts); err != nil {
		return nil, qerrToCmd(err)
	}
	out := &updateOutcome{}
	coll, cerr := w.target(false)
	if cerr != nil {
		return nil, cerr
	}
	var slots []*docSlot
	if coll != nil {
		if env, cerr = w.collatedEnv(env, coll, sp.collation, sp.hasCollation); cerr != nil {
			return nil, cerr
		}
		opts.Env = env
		slots, cerr = w.matching(coll, sp.q, f, !sp.multi && sp.sort == nil && !sp.hint.isSet(), env)
		if cerr != nil {
			return nil, cerr
		}
		if slots, cerr = sp.hint.apply(coll, slots); cerr != nil {
			return nil, cerr
		}
		if !sp.multi && len(slots) > 1 {
			s, err := pickSorted(slots, sp.sort, env.Collate)
			if err != nil {
				return nil, err
			}
			slots = []*docSlot{s}
		}
		if err := w.checkNotHeld(slotKeys(slots)...); err != nil {
			return nil, err
		}
	}
	for _, s := range slots {
		res, err := query.ApplyUpdate(s.doc, sp.u, opts)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		out.matched++
		if out.pre == nil {
			out.pre, out.post = s.doc, s.doc
		}
		if !res.Changed {
			continue
		}
		size, cerr := finishUpdatedDoc(res, docID(s.doc))
		if cerr != nil {
			return nil, cerr
		}
		if err := w.replaceDoc(coll, s, res, size); err != nil {
			return nil, err
		}
		if out.modified == 0 {
			out.post = res.Doc
		}
		out.modified++
	}
	if out.matched > 0 || !sp.upsert {
		return out, nil
	}
	// Upsert: seed from the query's equality fields, then apply the update as an insert.
	seed, err := query.EqualityFields(sp.q)
	if err != nil {
		return nil, qerrToCmd(err)
	}
	opts.Inserting = true
	res, err := query.ApplyUpdate(seed, sp.u, opts)
	if err != nil {
		return nil, qerrToCmd(err)
	}
	doc := res.Doc
	if _, ok := lookupD(doc, "_id"); !ok {
		if id, ok := lookupD(seed, "_id"); ok {
			doc = append(bson.D{{Key: "_id", Value: id}}, doc...)
		}
	}
	doc, size, cerr := prepareInsert(doc)
	if cerr != nil {
		return nil, cerr
	}
	coll, cerr = w.target(true)
	if cerr != nil {
		return nil, cerr
	}
	if err := w.insertDoc(coll, doc, size); err != nil {
		return nil, err
	}
	out.upserted, out.upsertedID, out.post = true, doc[0].Value, doc
	return out, nil
}

// finishUpdatedDoc checks an updated document: _id unchanged (put back first when the update
// dropped it), within the size limit. It returns the encoded size.
func finishUpdatedDoc(res *query.UpdateResult, oldID any) (int, *cmdError) {
	doc := res.Doc
	idx := -1
	for i, f := range doc {
		if f.Key == "_id" {
			idx = i
			break
		}
	}
	switch {
	case idx < 0:
		doc = append(bson.D{{Key: "_id", Value: oldID}}, doc...)
	case !query.Equal(doc[idx].Value, oldID) || query.TypeOrder(doc[idx].Value) != query.TypeOrder(oldID):
		var sb strings.Builder
		writeShellValue(&sb, doc[idx].Value)
		return 0, errorf(codeImmutableField, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", sb.String())
	}
	// A replacement carrying its own _id keeps its field order, as the server stores it.
	res.Doc = doc
	size, err := docSize(doc)
	if err != nil {
		return 0, err
	}
	if size > maxBSONSize {
		return 0, errorf(codeDocTooLargeUpdate, "Resulting document after update is larger than %d", maxBSONSize)
	}
	return size, nil
}

// isReplacement reports whether u is a replacement document (no $-operators).
func isReplacement(u any) bool {
	d, ok := u.(bson.D)
	return ok && (len(d) == 0 || !strings.HasPrefix(d[0].Key, "$"))
}

// deleteMatching deletes the documents matching q (at most one when one is set, the first
// in sort order when sortSpec is given) and returns the deleted documents.
func (w *writeCtx) deleteMatching(q bson.D, one bool, sortSpec bson.D) ([]bson.D, *cmdError) {
	return w.deleteMatchingWith(q, one, sortSpec, stmtOptions{})
}

// stmtOptions are a delete statement's hint and collation.
type stmtOptions struct {
	hint         writeHint
	collation    any
	hasCollation bool
}

// deleteMatchingWith is deleteMatching through the index (or natural order) the hint names,
// comparing under the statement's collation (else the collection's default).
func (w *writeCtx) deleteMatchingWith(q bson.D, one bool, sortSpec bson.D, o stmtOptions) ([]bson.D, *cmdError) {
	hint := o.hint
	f, err := query.CompileFilter(q)
	if err != nil {
		return nil, qerrToCmd(err)
	}
	coll, cerr := w.target(false)
	if cerr != nil || coll == nil {
		return nil, cerr
	}
	env, cerr := w.collatedEnv(w.env, coll, o.collation, o.hasCollation)
	if cerr != nil {
		return nil, cerr
	}
	slots, cerr := w.matching(coll, q, f, one && sortSpec == nil && !hint.isSet(), env)
	if cerr != nil {
		return nil, cerr
	}
	if slots, cerr = hint.apply(coll, slots); cerr != nil {
		return nil, cerr
	}
	if one && len(slots) > 1 {
		s, err := pickSorted(slots, sortSpec, env.Collate)
		if err != nil {
			return nil, err
		}
		slots = []*docSlot{s}
	}
	if err := w.checkNotHeld(slotKeys(slots)...); err != nil {
		return nil, err
	}
	out := make([]bson.D, 0, len(slots))
	for _, s := range slots {
		if err := w.deleteDoc(coll, s); err != nil {
			return out, err
		}
		out = append(out, s.doc)
	}
	return out, nil
}

// writeErrorDoc renders a statement failure as a writeErrors element.
func writeErrorDoc(i int, err *cmdError) bson.D {
	d := bson.D{{Key: "index", Value: int32(i)}, {Key: "code", Value: err.Code}}
	d = append(d, err.Extra...)
	return append(d, bson.E{Key: "errmsg", Value: err.Msg})
}

// orderedArg reads the ordered flag (default true).
func orderedArg(c *command) bool {
	if v, ok := c.Arg("ordered"); ok {
		if b, ok := v.(bool); ok {
			return b
		}
	}
	return true
}

// statements returns the array argument of a write command (documents, updates, deletes).
func statements(c *command, field string) (bson.A, *cmdError) {
	v, ok := c.Arg(field)
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field '%s.%s' is missing but a required field", c.Name, field)
	}
	arr, ok := v.(bson.A)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", c.Name, field, typeName(v))
	}
	if len(arr) > 100_000 {
		return nil, errorf(codeInvalidLength, "Write batch sizes must be between 1 and 100000. Got %d operations.", len(arr))
	}
	return arr, nil
}

// runWrite is the common frame of insert, update and delete: it holds e.mu, answers retries
// of retryable writes from the session (the whole reply, or the statements an interrupted
// attempt executed), runs the statements, aborts the transaction on a failure inside one,
// and stores the reply for retries. stmt runs statement i and returns what it did.
func (s *Server) runWrite(c *command, field string, stmt func(w *writeCtx, i int, v any) (stmtOutcome, *cmdError)) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	arr, err := statements(c, field)
	if err != nil {
		return nil, err
	}
	ordered := orderedArg(c)
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if reply, found, rerr := e.retryLookupLocked(c); rerr != nil || found {
		return reply, rerr
	}
	w, cerr := e.newWriteCtxLocked(c, name)
	if cerr != nil {
		return nil, cerr
	}
	var (
		writeErrors bson.A
		n, modified int32
		upserted    bson.A
		isUpdate    = c.Name == "update"
		accumulate  = func(i int, o stmtOutcome) {
			n += o.n
			modified += o.modified
			if o.upserted {
				upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: o.upsertedID}})
			}
		}
	)
	for i, v := range arr {
		if o, done := w.executed(i); done {
			accumulate(i, o)
			continue
		}
		o, err := stmt(w, i, v)
		for err == errTxnBlocked {
			// Nothing of statement i was applied: wait for the transaction, then run it again.
			if werr := w.waitBlocked(); werr != nil {
				return nil, werr
			}
			o, err = stmt(w, i, v)
		}
		if err = w.endStatement(err); err == errStmtDropped {
			return nil, errCloseConnection
		}
		if err == nil {
			accumulate(i, o)
			w.keepOutcome(i, o)
			continue
		}
		if w.txn != nil {
			// Any failure inside a transaction aborts it (later commands get 251).
			e.abortTxnLocked(w.txn)
			if err.Code == codeWriteConflict {
				return nil, err
			}
		}
		writeErrors = append(writeErrors, writeErrorDoc(i, err))
		if ordered || w.txn != nil {
			break
		}
	}
	reply := bson.D{{Key: "n", Value: n}}
	if isUpdate {
		reply = append(reply, bson.E{Key: "nModified", Value: modified})
		if len(upserted) > 0 {
			reply = append(reply, bson.E{Key: "upserted", Value: upserted})
		}
	}
	if len(writeErrors) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	w.storeReplyLocked(reply)
	return reply, nil
}

// checkStatementOptions checks a statement's hint and collation.
func checkStatementOptions(st bson.D) *cmdError {
	if _, err := statementHint(st); err != nil {
		return err
	}
	if col, ok := lookupD(st, "collation"); ok && col != nil {
		if _, err := parseCollation(col); err != nil {
			return err
		}
	}
	return nil
}

// statementOptions reads a checked statement's hint and collation.
func statementOptions(st bson.D) stmtOptions {
	o := stmtOptions{}
	o.hint, _ = statementHint(st)
	o.collation, o.hasCollation = lookupD(st, "collation")
	return o
}

func isEmptyHint(h any) bool {
	switch x := h.(type) {
	case string:
		return x == ""
	case bson.D:
		return len(x) == 0
	case nil:
		return true
	}
	return false
}

func cmdInsert(s *Server, c *command) (bson.D, error) {
	return s.runWrite(c, "documents", func(w *writeCtx, _ int, v any) (stmtOutcome, *cmdError) {
		doc, size, err := prepareInsert(v)
		if err != nil {
			return stmtOutcome{}, err
		}
		coll, err := w.target(true)
		if err != nil {
			return stmtOutcome{}, err
		}
		if err := w.insertDoc(coll, doc, size); err != nil {
			return stmtOutcome{}, err
		}
		return stmtOutcome{n: 1}, nil
	})
}

func cmdUpdate(s *Server, c *command) (bson.D, error) {
	if err := checkUpdatePipelines(c); err != nil {
		return nil, err
	}
	return s.runWrite(c, "updates", func(w *writeCtx, i int, v any) (stmtOutcome, *cmdError) {
		st, ok := v.(bson.D)
		if !ok {
			return stmtOutcome{}, errorf(codeTypeMismatch, "BSON field 'update.updates' must be an array of objects")
		}
		sp, err := parseUpdateStatement(st)
		if err != nil {
			return stmtOutcome{}, err
		}
		if sp.multi {
			if err := multiRetryableErr(w.c, "Cannot use (or request) retryable writes with multi=true"); err != nil {
				return stmtOutcome{}, err
			}
		}
		out, err := w.update(sp)
		if err != nil {
			return stmtOutcome{}, err
		}
		o := stmtOutcome{n: int32(out.matched), modified: int32(out.modified)}
		if out.upserted {
			o.n++
			o.upserted, o.upsertedID = true, out.upsertedID
		}
		return o, nil
	})
}

// checkUpdatePipelines parses the pipeline of every pipeline-style statement before any runs: a
// server parses them with the command, so an unknown or forbidden stage, or a malformed
// expression, fails the whole command instead of becoming a write error.
func checkUpdatePipelines(c *command) *cmdError {
	v, _ := c.Arg("updates")
	arr, _ := v.(bson.A)
	for _, st := range arr {
		d, _ := st.(bson.D)
		u, _ := lookupD(d, "u")
		if p, ok := u.(bson.A); ok {
			if err := query.ValidateUpdate(p); err != nil {
				if ce, ok := queryErr(err).(*cmdError); ok {
					return ce
				}
				return errorf(codeBadValue, "%v", err)
			}
		}
	}
	return nil
}

// parseUpdateStatement reads {q, u, upsert, multi, arrayFilters, sort, hint, collation}.
func parseUpdateStatement(st bson.D) (updateSpec, *cmdError) {
	var sp updateSpec
	if err := checkStatementOptions(st); err != nil {
		return sp, err
	}
	o := statementOptions(st)
	sp.hint, sp.collation, sp.hasCollation = o.hint, o.collation, o.hasCollation
	qv, ok := lookupD(st, "q")
	if !ok {
		return sp, errorf(codeFailedToParse, "BSON field 'update.updates.q' is missing but a required field")
	}
	if sp.q, ok = qv.(bson.D); !ok {
		return sp, errorf(codeTypeMismatch, "BSON field 'update.updates.q' is the wrong type '%s', expected type 'object'", typeName(qv))
	}
	uv, ok := lookupD(st, "u")
	if !ok {
		return sp, errorf(codeFailedToParse, "BSON field 'update.updates.u' is missing but a required field")
	}
	switch uv.(type) {
	case bson.D, bson.A:
		sp.u = uv
	default:
		return sp, errorf(codeFailedToParse, "Update argument must be either an object or an array")
	}
	for _, f := range st {
		switch f.Key {
		case "upsert":
			sp.upsert = truthy(f.Value)
		case "multi":
			sp.multi = truthy(f.Value)
		case "arrayFilters":
			af, ok := f.Value.(bson.A)
			if !ok {
				return sp, errorf(codeTypeMismatch, "BSON field 'update.updates.arrayFilters' is the wrong type '%s', expected type 'array'", typeName(f.Value))
			}
			sp.arrayFilters = af
		case "sort":
			sd, ok := f.Value.(bson.D)
			if !ok {
				return sp, errorf(codeTypeMismatch, "BSON field 'update.updates.sort' is the wrong type '%s', expected type 'object'", typeName(f.Value))
			}
			if len(sd) > 0 {
				sp.sort = sd
			}
		case "c":
			cd, ok := f.Value.(bson.D)
			if !ok {
				return sp, errorf(codeTypeMismatch, "BSON field 'update.updates.c' is the wrong type '%s', expected type 'object'", typeName(f.Value))
			}
			sp.constants = cd
		case "q", "u", "hint", "collation", "upsertSupplied":
		default:
			return sp, errorf(40415, "BSON field 'update.updates.%s' is an unknown field.", f.Key)
		}
	}
	if sp.multi && sp.sort != nil {
		return sp, errorf(codeFailedToParse, "Cannot specify sort with multi=true")
	}
	return sp, nil
}

func cmdDelete(s *Server, c *command) (bson.D, error) {
	return s.runWrite(c, "deletes", func(w *writeCtx, _ int, v any) (stmtOutcome, *cmdError) {
		st, ok := v.(bson.D)
		if !ok {
			return stmtOutcome{}, errorf(codeTypeMismatch, "BSON field 'delete.deletes' must be an array of objects")
		}
		if err := checkStatementOptions(st); err != nil {
			return stmtOutcome{}, err
		}
		qv, ok := lookupD(st, "q")
		if !ok {
			return stmtOutcome{}, errorf(codeFailedToParse, "BSON field 'delete.deletes.q' is missing but a required field")
		}
		q, ok := qv.(bson.D)
		if !ok {
			return stmtOutcome{}, errorf(codeTypeMismatch, "BSON field 'delete.deletes.q' is the wrong type '%s', expected type 'object'", typeName(qv))
		}
		lv, ok := lookupD(st, "limit")
		if !ok {
			return stmtOutcome{}, errorf(codeFailedToParse, "BSON field 'delete.deletes.limit' is missing but a required field")
		}
		limit, _ := asInt64(lv)
		if limit != 0 && limit != 1 {
			return stmtOutcome{}, errorf(codeFailedToParse, "The limit field in delete objects must be 0 or 1. Got %v", lv)
		}
		for _, f := range st {
			switch f.Key {
			case "q", "limit", "hint", "collation":
			default:
				return stmtOutcome{}, errorf(40415, "BSON field 'delete.deletes.%s' is an unknown field.", f.Key)
			}
		}
		if limit == 0 {
			if err := multiRetryableErr(w.c, "Cannot use (or request) retryable writes with limit=0"); err != nil {
				return stmtOutcome{}, err
			}
		}
		deleted, err := w.deleteMatchingWith(q, limit == 1, nil, statementOptions(st))
		return stmtOutcome{n: int32(len(deleted))}, err
	})
}
