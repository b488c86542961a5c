package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindWrite, cmdBulkWrite, "bulkWrite")
}

// bulkWriteFields are the fields of the client-level bulkWrite command (8.0) besides the
// generic ones.
var bulkWriteFields = map[string]bool{
	"bulkWrite": true, "ops": true, "nsInfo": true, "ordered": true, "errorsOnly": true,
	"bypassDocumentValidation": true, "let": true, "cursor": true,
}

// cmdBulkWrite runs the client-level bulkWrite command of MongoDB 8.0: inserts, updates and
// deletes on any namespaces (nsInfo), in one command, answered with a cursor of per-operation
// results ({ok, idx, n, nModified, upserted} or {ok: 0, idx, code, codeName, errmsg}; only the
// errors with errorsOnly) and the totals nInserted, nMatched, nModified, nUpserted, nDeleted and
// nErrors. Each operation runs as the single-statement insert, update or delete would, with the
// same change events; ordered (the default) stops at the first error. Retryable bulkWrites are
// answered from the stored reply on retry, and inside a transaction an error aborts it.
func cmdBulkWrite(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "bulkWrite may only be run against the admin database.")
	}
	for _, f := range c.Body {
		if !bulkWriteFields[f.Key] && !genericCommandFields[f.Key] {
			return nil, errorf(40415, "BSON field 'bulkWrite.%s' is an unknown field.", f.Key)
		}
	}
	opsV, ok := c.Arg("ops")
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field 'bulkWrite.ops' is missing but a required field")
	}
	ops, ok := opsV.(bson.A)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'bulkWrite.ops' is the wrong type '%s', expected type 'array'", typeName(opsV))
	}
	nsV, ok := c.Arg("nsInfo")
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field 'bulkWrite.nsInfo' is missing but a required field")
	}
	nsArr, ok := nsV.(bson.A)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'bulkWrite.nsInfo' is the wrong type '%s', expected type 'array'", typeName(nsV))
	}
	if len(ops) == 0 || len(ops) > 100_000 {
		return nil, errorf(codeInvalidLength, "Write batch sizes must be between 1 and 100000. Got %d operations.", len(ops))
	}
	type nsRef struct{ db, coll string }
	nss := make([]nsRef, len(nsArr))
	for i, v := range nsArr {
		d, _ := v.(bson.D)
		ns, _ := lookupD(d, "ns")
		str, ok := ns.(string)
		db, coll, found := cutNamespace(str)
		if !ok || !found {
			return nil, errorf(codeInvalidNamespace, "BSON field 'bulkWrite.nsInfo.%d.ns' must be a namespace 'db.collection', got %v", i, ns)
		}
		if _, ok := lookupD(d, "encryptionInformation"); ok {
			return nil, unsupported("queryable encryption (bulkWrite nsInfo encryptionInformation)")
		}
		nss[i] = nsRef{db, coll}
	}
	// Parse every operation before running any: a malformed one fails the command, as on a
	// server.
	type bulkOp struct {
		kind string // insert, update or delete
		ns   nsRef
		doc  bson.D // insert document
		upd  updateSpec
		q    bson.D      // delete filter
		one  bool        // delete: multi false
		opts stmtOptions // hint and collation
	}
	parsed := make([]bulkOp, len(ops))
	for i, v := range ops {
		d, ok := v.(bson.D)
		if !ok || len(d) == 0 {
			return nil, errorf(codeTypeMismatch, "BSON field 'bulkWrite.ops.%d' must be an object", i)
		}
		kind := d[0].Key
		idx, ok := asInt64(d[0].Value)
		if !ok || idx < 0 || int(idx) >= len(nss) {
			return nil, errorf(codeBadValue, "BulkWrite ops entry %d has an invalid nsInfo index %v", i, d[0].Value)
		}
		op := bulkOp{kind: kind, ns: nss[idx]}
		switch kind {
		case "insert":
			for _, f := range d[1:] {
				if f.Key != "document" {
					return nil, errorf(40415, "BSON field 'bulkWrite.ops.insert.%s' is an unknown field.", f.Key)
				}
			}
			doc, _ := lookupD(d, "document")
			dd, ok := doc.(bson.D)
			if !ok {
				return nil, errorf(codeFailedToParse, "BSON field 'bulkWrite.ops.insert.document' is missing but a required field")
			}
			op.doc = dd
		case "update":
			st := bson.D{}
			for _, f := range d[1:] {
				switch f.Key {
				case "filter":
					st = append(st, bson.E{Key: "q", Value: f.Value})
				case "updateMods":
					st = append(st, bson.E{Key: "u", Value: f.Value})
				case "constants":
					st = append(st, bson.E{Key: "c", Value: f.Value})
				case "multi", "upsert", "arrayFilters", "hint", "collation", "sort":
					st = append(st, f)
				default:
					return nil, errorf(40415, "BSON field 'bulkWrite.ops.update.%s' is an unknown field.", f.Key)
				}
			}
			sp, err := parseUpdateStatement(st)
			if err != nil {
				return nil, err
			}
			if p, ok := sp.u.(bson.A); ok {
				if err := query.ValidateUpdate(p); err != nil {
					if ce, ok := queryErr(err).(*cmdError); ok {
						return nil, ce
					}
					return nil, errorf(codeBadValue, "%v", err)
				}
			}
			op.upd = sp
		case "delete":
			st := bson.D{}
			for _, f := range d[1:] {
				switch f.Key {
				case "filter":
					q, ok := f.Value.(bson.D)
					if !ok {
						return nil, errorf(codeTypeMismatch, "BSON field 'bulkWrite.ops.delete.filter' is the wrong type '%s', expected type 'object'", typeName(f.Value))
					}
					op.q = q
				case "multi":
					op.one = !truthy(f.Value)
				case "hint", "collation":
					st = append(st, f)
				default:
					return nil, errorf(40415, "BSON field 'bulkWrite.ops.delete.%s' is an unknown field.", f.Key)
				}
			}
			if op.q == nil {
				return nil, errorf(codeFailedToParse, "BSON field 'bulkWrite.ops.delete.filter' is missing but a required field")
			}
			if _, ok := lookupD(d, "multi"); !ok {
				op.one = true
			}
			if err := checkStatementOptions(st); err != nil {
				return nil, err
			}
			op.opts = statementOptions(st)
		default:
			return nil, errorf(codeFailedToParse, "Unrecognized bulkWrite operation '%s' in ops entry %d", kind, i)
		}
		parsed[i] = op
	}
	errorsOnly := false
	if v, ok := c.Arg("errorsOnly"); ok {
		errorsOnly = truthy(v)
	}
	ordered := orderedArg(c)

	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if reply, found, rerr := e.retryLookupLocked(c); rerr != nil || found {
		return reply, rerr
	}
	w, cerr := e.newWriteCtxLocked(c, "")
	if cerr != nil {
		return nil, cerr
	}
	var nInserted, nMatched, nModified, nUpserted, nDeleted, nErrors int32
	results := bson.A{}
	for i, op := range parsed {
		w.db, w.name = op.ns.db, op.ns.coll
		o, done := w.executed(i)
		var err *cmdError
		if !done {
			o, err = w.bulkOp(op.kind, op.doc, op.upd, op.q, op.one, op.opts)
			if err = w.endStatement(err); err == errStmtDropped {
				return nil, errCloseConnection
			}
			if err == nil {
				w.keepOutcome(i, o)
			}
		}
		if err != nil {
			if w.txn != nil {
				e.abortTxnLocked(w.txn)
				if err.Code == codeWriteConflict {
					return nil, err
				}
			}
			nErrors++
			fail := bson.D{{Key: "ok", Value: 0.0}, {Key: "idx", Value: int32(i)}, {Key: "code", Value: err.Code},
				{Key: "codeName", Value: codeName(err.Code)}, {Key: "errmsg", Value: err.Msg}}
			results = append(results, append(fail, err.Extra...))
			if ordered || w.txn != nil {
				break
			}
			continue
		}
		res := bson.D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(i)}, {Key: "n", Value: o.n}}
		switch op.kind {
		case "insert":
			nInserted++
		case "update":
			nMatched += o.n
			if o.upserted {
				nMatched--
				nUpserted++
			}
			nModified += o.modified
			res = append(res, bson.E{Key: "nModified", Value: o.modified})
			if o.upserted {
				res = append(res, bson.E{Key: "upserted", Value: bson.D{{Key: "_id", Value: o.upsertedID}}})
			}
		case "delete":
			nDeleted += o.n
		}
		if !errorsOnly {
			results = append(results, res)
		}
	}
	reply := bson.D{
		{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "firstBatch", Value: results},
			{Key: "ns", Value: "admin.$cmd.bulkWrite"}}},
		{Key: "nErrors", Value: nErrors}, {Key: "nInserted", Value: nInserted}, {Key: "nMatched", Value: nMatched},
		{Key: "nModified", Value: nModified}, {Key: "nUpserted", Value: nUpserted}, {Key: "nDeleted", Value: nDeleted},
	}
	w.storeReplyLocked(reply)
	return reply, nil
}

// bulkOp runs one operation of a client bulkWrite: insert doc, update upd, or delete the
// documents matching q (one or all).
func (w *writeCtx) bulkOp(kind string, doc bson.D, upd updateSpec, q bson.D, one bool, opts stmtOptions) (stmtOutcome, *cmdError) {
	switch kind {
	case "insert":
		doc, size, err := prepareInsert(doc)
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
	case "update":
		if upd.multi {
			if err := multiRetryableErr(w.c, "Cannot use retryable writes with multi=true"); err != nil {
				return stmtOutcome{}, err
			}
		}
		out, err := w.update(upd)
		if err != nil {
			return stmtOutcome{}, err
		}
		o := stmtOutcome{n: int32(out.matched), modified: int32(out.modified)}
		if out.upserted {
			o.n++
			o.upserted, o.upsertedID = true, out.upsertedID
		}
		return o, nil
	default: // delete
		if !one {
			if err := multiRetryableErr(w.c, "Cannot use retryable writes with multi=true"); err != nil {
				return stmtOutcome{}, err
			}
		}
		deleted, err := w.deleteMatchingWith(q, one, nil, opts)
		return stmtOutcome{n: int32(len(deleted))}, err
	}
}

// cutNamespace splits "db.coll" at the first dot.
func cutNamespace(ns string) (db, coll string, ok bool) {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:], i > 0 && i < len(ns)-1
		}
	}
	return "", "", false
}
