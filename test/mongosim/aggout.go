package mongosim

import (
	"encoding/hex"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// Codes of the $out and $merge stages.
const (
	codeMergeNoUniqueIndex   = 51183 // the on fields have no unique index in the target
	codeMergeOnFieldInvalid  = 51132 // a document's on field is missing, null, undefined or an array
	codeMergeNoMatch         = 13113 // whenNotMatched: fail met a document with no match
	codeFinalStageOnly       = 40601 // $out/$merge not last
	codeOutInternalDB        = 31321
	codeMergeInternalDB      = 31320
	codeOutSpecialCollection = 17385
)

// outStage is a parsed $out or $merge: the last stage of an aggregate, which writes the
// pipeline's result into a collection instead of returning it.
type outStage struct {
	merge    bool
	db, coll string
	// $merge only.
	on             []string // nil: _id
	let            bson.D   // nil: {new: "$$ROOT"}
	whenMatched    string   // replace, keepExisting, merge, fail, or "pipeline"
	matchedPipe    bson.A   // whenMatched as a pipeline
	whenNotMatched string   // insert, discard, fail
}

// splitOutStage takes a final $out or $merge off pipeline and parses it; db is the database the
// aggregate runs in (the default target database). A $out or $merge before the end fails as
// on a server.
func splitOutStage(pipeline bson.A, db string) (bson.A, *outStage, *cmdError) {
	for i, st := range pipeline {
		sd, _ := st.(bson.D)
		if len(sd) != 1 || (sd[0].Key != "$out" && sd[0].Key != "$merge") {
			continue
		}
		if i != len(pipeline)-1 {
			return nil, nil, errorf(codeFinalStageOnly, "%s can only be the final stage in the pipeline", sd[0].Key)
		}
		var out *outStage
		var err *cmdError
		if sd[0].Key == "$out" {
			out, err = parseOut(sd[0].Value, db)
		} else {
			out, err = parseMerge(sd[0].Value, db)
		}
		return pipeline[:i], out, err
	}
	return pipeline, nil, nil
}

func parseOut(v any, db string) (*outStage, *cmdError) {
	out := &outStage{db: db}
	switch x := v.(type) {
	case string:
		out.coll = x
	case bson.D:
		for _, f := range x {
			switch f.Key {
			case "db", "coll":
				s, ok := f.Value.(string)
				if !ok {
					return nil, errorf(codeTypeMismatch, "BSON field '$out.%s' is the wrong type '%s', expected type 'string'", f.Key, typeName(f.Value))
				}
				if f.Key == "db" {
					out.db = s
				} else {
					out.coll = s
				}
			case "timeseries":
				return nil, unsupported("$out into a time-series collection ($out.timeseries)")
			default:
				return nil, errorf(40415, "BSON field '$out.%s' is an unknown field.", f.Key)
			}
		}
		if out.coll == "" {
			return nil, errorf(40414, "BSON field '$out.coll' is missing but a required field")
		}
	default:
		return nil, errorf(16990, "$out only supports a string or object argument, not %s", typeName(v))
	}
	if err := checkOutTarget(out, codeOutInternalDB, "$out"); err != nil {
		return nil, err
	}
	return out, nil
}

func parseMerge(v any, db string) (*outStage, *cmdError) {
	out := &outStage{merge: true, db: db, whenMatched: "merge", whenNotMatched: "insert"}
	switch x := v.(type) {
	case string:
		out.coll = x
	case bson.D:
		hasInto := false
		for _, f := range x {
			switch f.Key {
			case "into":
				hasInto = true
				switch iv := f.Value.(type) {
				case string:
					out.coll = iv
				case bson.D:
					for _, g := range iv {
						s, ok := g.Value.(string)
						if !ok || (g.Key != "db" && g.Key != "coll") {
							return nil, errorf(codeFailedToParse, "$merge 'into' field must be a string or an object {db, coll}, found field %s", g.Key)
						}
						if g.Key == "db" {
							out.db = s
						} else {
							out.coll = s
						}
					}
				default:
					return nil, errorf(51178, "$merge 'into' field must be either a string or an object, but found %s", typeName(f.Value))
				}
			case "on":
				on, err := parseMergeOn(f.Value)
				if err != nil {
					return nil, err
				}
				out.on = on
			case "let":
				d, ok := f.Value.(bson.D)
				if !ok {
					return nil, errorf(codeTypeMismatch, "BSON field '$merge.let' is the wrong type '%s', expected type 'object'", typeName(f.Value))
				}
				out.let = d
			case "whenMatched":
				switch m := f.Value.(type) {
				case string:
					switch m {
					case "replace", "keepExisting", "merge", "fail":
						out.whenMatched = m
					default:
						return nil, errorf(codeBadValue, "Enumeration value '%s' for field '$merge.whenMatched' is not a valid value.", m)
					}
				case bson.A:
					if err := query.ValidateUpdate(m); err != nil {
						return nil, qerrToCmd(err)
					}
					out.whenMatched, out.matchedPipe = "pipeline", m
				default:
					return nil, errorf(51191, "$merge 'whenMatched' field must be either a string or an array, but found %s", typeName(f.Value))
				}
			case "whenNotMatched":
				m, _ := f.Value.(string)
				switch m {
				case "insert", "discard", "fail":
					out.whenNotMatched = m
				default:
					return nil, errorf(codeBadValue, "Enumeration value '%v' for field '$merge.whenNotMatched' is not a valid value.", f.Value)
				}
			default:
				return nil, errorf(40415, "BSON field '$merge.%s' is an unknown field.", f.Key)
			}
		}
		if !hasInto {
			return nil, errorf(40414, "BSON field '$merge.into' is missing but a required field")
		}
	default:
		return nil, errorf(51182, "$merge only supports a string or object argument, but found %s", typeName(v))
	}
	if out.let != nil && out.whenMatched != "pipeline" {
		return nil, errorf(51199, "Cannot use 'let' variables with 'whenMatched: %s' mode", out.whenMatched)
	}
	if (out.whenMatched == "keepExisting" || out.whenMatched == "fail") && out.whenNotMatched != "insert" {
		return nil, errorf(51181, "Combination of {whenMatched: %s, whenNotMatched: %s} is not supported", out.whenMatched, out.whenNotMatched)
	}
	if err := checkOutTarget(out, codeMergeInternalDB, "$merge"); err != nil {
		return nil, err
	}
	return out, nil
}

// parseMergeOn reads $merge's on: a field name or an array of distinct field names.
func parseMergeOn(v any) ([]string, *cmdError) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case bson.A:
		if len(x) == 0 {
			return nil, errorf(51187, "If explicitly specifying $merge 'on', must include at least one field")
		}
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, errorf(51134, "$merge 'on' array elements must be strings, but found %s", typeName(e))
			}
			if slices.Contains(out, s) {
				return nil, errorf(31465, "Found a duplicate field '%s'", s)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, errorf(51186, "$merge 'on' field must be either a string or an array of strings, but found %s", typeName(v))
}

// checkOutTarget refuses the internal databases and system collections as targets.
func checkOutTarget(out *outStage, internalCode int32, stage string) *cmdError {
	switch out.db {
	case "admin", "config", "local":
		verb := "Can't"
		if stage == "$merge" {
			verb = "Cannot"
		}
		return errorf(internalCode, "%s %s to internal database: %s", verb, stage, out.db)
	}
	if strings.HasPrefix(out.coll, "system.") {
		return errorf(codeOutSpecialCollection, "Can't %s to special collection: %s", stage, out.coll)
	}
	return validCollName(out.db, out.coll)
}

// isIDOnly reports whether the stage merges on _id (the default).
func (o *outStage) isIDOnly() bool { return len(o.on) == 0 || (len(o.on) == 1 && o.on[0] == "_id") }

// writeAggOutput writes an aggregate's result docs as out says, under e.mu, and returns the
// (empty) cursor reply of such an aggregate.
func (s *Server) writeAggOutput(c *command, out *outStage, docs []bson.D) (bson.D, error) {
	if c.InTransaction() {
		stage := "$out"
		if out.merge {
			stage = "$merge"
		}
		return nil, errorf(codeOperationNotSupportedInTransaction, "%s cannot be used in a transaction", stage)
	}
	e := s.eng
	e.mu.Lock()
	var err error
	if out.merge {
		err = e.mergeLocked(c, out, docs)
	} else {
		err = e.outLocked(c, out, docs)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return e.firstBatch(c, newStaticCursor(c.DB+"."+nsCollOf(c), nil), 0)
}

// nsCollOf is the collection an aggregate names, or "$cmd.aggregate" for aggregate: 1.
func nsCollOf(c *command) string {
	if s, ok := c.Body[0].Value.(string); ok {
		return s
	}
	return "$cmd.aggregate"
}

// outLocked replaces the target with docs as a server's $out does: the documents go into a
// temporary collection of the target database (tmp.agg_out.<uuid>) that has the target's
// options and indexes, which is then renamed over the target. Change streams see the temporary
// collection's inserts and the rename (with the target's drop); a failure (a duplicate key)
// drops the temporary collection and leaves the target as it was. Caller holds e.mu.
func (e *engine) outLocked(c *command, out *outStage, docs []bson.D) error {
	if err := e.checkWritableTargetLocked(out.db, out.coll); err != nil {
		return err
	}
	old := e.collLocked(out.db, out.coll)
	tmpName := "tmp.agg_out." + hex.EncodeToString(newUUID().Data)
	tmp := newCollection(out.db, tmpName)
	if old != nil {
		tmp.options = slices.Clone(old.options)
		tmp.preAndPostImages = old.preAndPostImages
		tmp.collation = old.collation
		if old.kind != nil && old.kind.capped {
			return errorf(17152, "namespace '%s' is capped so it can't be used for $out", old.ns())
		}
		tmp.kind = old.kind
		for _, ix := range old.indexes[1:] {
			cp := ix.clone()
			if cp.entries != nil {
				cp.entries = make(map[string]string)
			}
			tmp.indexes = append(tmp.indexes, cp)
		}
	}
	e.addCollectionLocked(tmp, nil)
	w, err := e.newWriteCtxLocked(c, tmpName)
	if err != nil {
		e.dropCollectionLocked(tmp)
		return err
	}
	w.db = out.db
	for _, d := range docs {
		doc, size, err := prepareInsert(d)
		if err == nil {
			err = w.insertDoc(tmp, doc, size)
		}
		if err != nil {
			e.dropCollectionLocked(tmp)
			return err
		}
	}
	e.renameLocked(tmp, out.db, out.coll)
	return nil
}

// checkWritableTargetLocked refuses an output namespace that cannot take writes (a view, the
// oplog). Caller holds e.mu.
func (e *engine) checkWritableTargetLocked(db, coll string) *cmdError {
	if isOplogView(db, coll) {
		return errorf(codeInvalidNamespace, "cannot write to '%s.%s'", db, coll)
	}
	return e.viewWriteErrorLocked(db, coll)
}

// mergeLocked writes docs into the target as $merge does, one document at a time; documents
// written before a failure stay written, as on a server. The writes are the ones a server
// makes, and so are their change events: an insert for an unmatched document, a replace
// (whenMatched replace), an update (merge, or a pipeline) or nothing (keepExisting) for a
// matched one. Caller holds e.mu.
func (e *engine) mergeLocked(c *command, out *outStage, docs []bson.D) error {
	if err := e.checkWritableTargetLocked(out.db, out.coll); err != nil {
		return err
	}
	w, err := e.newWriteCtxLocked(c, out.coll)
	if err != nil {
		return err
	}
	w.db = out.db
	coll := e.collLocked(out.db, out.coll)
	var onIndex *index
	if !out.isIDOnly() {
		if coll != nil {
			onIndex = mergeOnIndex(coll, out.on)
		}
		if onIndex == nil {
			return errorf(codeMergeNoUniqueIndex, "Cannot find index to verify that join fields will be unique")
		}
	}
	for _, d := range docs {
		err := w.mergeOne(out, onIndex, d)
		for err == errTxnBlocked {
			if werr := w.waitBlocked(); werr != nil {
				return werr
			}
			err = w.mergeOne(out, onIndex, d)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// mergeOnIndex returns a unique, non-partial index of coll whose key fields are exactly on (in
// any order), or nil.
func mergeOnIndex(coll *collection, on []string) *index {
	for _, ix := range coll.indexes {
		if !ix.unique || ix.partial != nil || len(ix.key) != len(on) {
			continue
		}
		all := true
		for _, f := range ix.key {
			if !slices.Contains(on, f.Key) {
				all = false
				break
			}
		}
		if all {
			return ix
		}
	}
	return nil
}

// mergeOne merges one source document into the target.
func (w *writeCtx) mergeOne(out *outStage, onIndex *index, src bson.D) *cmdError {
	coll, err := w.target(false)
	if err != nil {
		return err
	}
	var match *docSlot
	var onKey []any
	if onIndex == nil {
		if id, ok := lookupD(src, "_id"); ok && coll != nil {
			match = coll.slot(query.HashKey(id))
		}
	} else {
		for _, f := range out.on {
			v, ok := lookupPath(src, f)
			switch v.(type) {
			case nil, bson.Undefined, bson.A:
				ok = false
			}
			if !ok {
				return errorf(codeMergeOnFieldInvalid, "$merge write error: 'on' field cannot be missing, null, undefined or an array")
			}
		}
		keys, kerr := onIndex.keysFor(src)
		if kerr != nil {
			return kerr
		}
		if len(keys) == 1 {
			onKey = keys[0].vals
			if holder, ok := onIndex.entries[keys[0].hash]; ok {
				match = coll.slot(holder)
			}
		}
	}
	if match == nil {
		switch out.whenNotMatched {
		case "discard":
			return nil
		case "fail":
			return errorf(codeMergeNoMatch, "$merge could not find a matching document in the target collection for at least one document in the source collection")
		}
		doc, size, err := prepareInsert(src)
		if err != nil {
			return err
		}
		if coll, err = w.target(true); err != nil {
			return err
		}
		return w.insertDoc(coll, doc, size)
	}
	if err := w.checkNotHeld(match.key); err != nil {
		return err
	}
	var u any
	opts := query.UpdateOptions{Env: w.env}
	switch out.whenMatched {
	case "keepExisting":
		return nil
	case "fail": // the insert a server tries meets the matched document's key
		if onIndex != nil {
			return coll.dupKeyError(onIndex, onKey)
		}
		return coll.dupKeyError(coll.indexes[0], []any{docID(match.doc)})
	case "replace":
		u = src
		if len(src) == 0 {
			u = bson.D{}
		}
	case "merge":
		u = bson.D{{Key: "$set", Value: src}}
		if len(src) == 0 {
			return nil // nothing to set
		}
	case "pipeline":
		u = out.matchedPipe
		env := *w.env
		env.Vars = make(map[string]any, len(w.env.Vars)+1)
		for k, v := range w.env.Vars {
			env.Vars[k] = v
		}
		if out.let == nil {
			env.Vars["new"] = src
		}
		for _, f := range out.let {
			v, err := query.Eval(f.Value, src, w.env)
			if err != nil {
				return qerrToCmd(err)
			}
			env.Vars[f.Key] = v
		}
		opts.Env = &env
	}
	res, qerr := query.ApplyUpdate(match.doc, u, opts)
	if qerr != nil {
		return qerrToCmd(qerr)
	}
	if !res.Changed {
		return nil
	}
	size, cerr := finishUpdatedDoc(res, docID(match.doc))
	if cerr != nil {
		if cerr.Code == codeImmutableField {
			cerr = errorf(codeImmutableField, "$merge failed to update the matching document, did you attempt to modify the _id or the shard key? :: caused by :: %s", cerr.Msg)
		}
		return cerr
	}
	return w.replaceDoc(coll, match, res, size)
}

// lookupPath returns the value at a dotted path of embedded documents.
func lookupPath(d bson.D, path string) (any, bool) {
	var cur any = d
	for _, p := range strings.Split(path, ".") {
		sub, ok := cur.(bson.D)
		if !ok {
			return nil, false
		}
		if cur, ok = lookupD(sub, p); !ok {
			return nil, false
		}
	}
	return cur, true
}
