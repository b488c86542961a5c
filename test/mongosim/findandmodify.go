package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindWrite, cmdFindAndModify, "findAndModify", "findandmodify")
}

// famArgs are the parsed fields of a findAndModify command.
type famArgs struct {
	query        bson.D
	sort         bson.D
	remove       bool
	update       any // bson.D or bson.A (pipeline); nil when removing
	returnNew    bool
	fields       bson.D
	upsert       bool
	arrayFilters bson.A
	hint         writeHint
	collation    any // collation.go
	hasCollation bool
}

func parseFindAndModify(c *command) (*famArgs, *cmdError) {
	a := &famArgs{}
	hasUpdate := false
	for _, f := range c.Body[1:] {
		switch f.Key {
		case "query", "sort", "fields":
			if f.Value == nil {
				continue
			}
			d, ok := f.Value.(bson.D)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'findAndModify.%s' is the wrong type '%s', expected type 'object'", f.Key, typeName(f.Value))
			}
			switch f.Key {
			case "query":
				a.query = d
			case "sort":
				if len(d) > 0 {
					a.sort = d
				}
			case "fields":
				if len(d) > 0 {
					a.fields = d
				}
			}
		case "remove":
			a.remove = truthy(f.Value)
		case "update":
			switch f.Value.(type) {
			case bson.D, bson.A:
				a.update, hasUpdate = f.Value, true
			default:
				return nil, errorf(codeFailedToParse, "Update argument must be either an object or an array")
			}
		case "new":
			a.returnNew = truthy(f.Value)
		case "upsert":
			a.upsert = truthy(f.Value)
		case "arrayFilters":
			af, ok := f.Value.(bson.A)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'findAndModify.arrayFilters' is the wrong type '%s', expected type 'array'", typeName(f.Value))
			}
			a.arrayFilters = af
		case "hint":
			h, err := parseWriteHint(f.Value)
			if err != nil {
				return nil, err
			}
			a.hint = h
		case "collation":
			if f.Value != nil {
				if _, err := parseCollation(f.Value); err != nil {
					return nil, err
				}
			}
			a.collation, a.hasCollation = f.Value, true
		case "bypassDocumentValidation", "let", "maxTimeMS":
		default:
			if !genericCommandFields[f.Key] {
				return nil, errorf(40415, "BSON field 'findAndModify.%s' is an unknown field.", f.Key)
			}
		}
	}
	if a.query == nil {
		a.query = bson.D{}
	}
	if a.fields != nil {
		// An invalid projection fails before anything is modified, as on a server.
		if _, err := query.Project(bson.D{{Key: "_id", Value: int32(0)}}, a.fields, nil); err != nil {
			return nil, qerrToCmd(err)
		}
	}
	switch {
	case a.remove && hasUpdate:
		return nil, errorf(codeFailedToParse, "Cannot specify both an update and remove=true")
	case !a.remove && !hasUpdate:
		return nil, errorf(codeFailedToParse, "Either an update or remove=true must be specified")
	case a.remove && a.upsert:
		return nil, errorf(codeFailedToParse, "Cannot specify both upsert=true and remove=true ")
	case a.remove && a.returnNew:
		return nil, errorf(codeFailedToParse, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	}
	return a, nil
}

// cmdFindAndModify updates, replaces or removes one document and returns it (before or
// after) with the lastErrorObject shapes of reference §2.4. Errors, DuplicateKey included,
// are command errors.
func cmdFindAndModify(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	a, cerr := parseFindAndModify(c)
	if cerr != nil {
		return nil, cerr
	}
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
	reply, cerr := w.findAndModify(a)
	for cerr == errTxnBlocked {
		if werr := w.waitBlocked(); werr != nil {
			return nil, werr
		}
		reply, cerr = w.findAndModify(a)
	}
	if cerr = w.endStatement(cerr); cerr == errStmtDropped {
		return nil, errCloseConnection
	}
	if cerr != nil {
		if w.txn != nil {
			e.abortTxnLocked(w.txn)
		}
		return nil, cerr
	}
	w.storeReplyLocked(reply)
	return reply, nil
}

func (w *writeCtx) findAndModify(a *famArgs) (bson.D, *cmdError) {
	var value any // nil encodes as BSON null
	project := func(doc bson.D) (any, *cmdError) {
		if doc == nil {
			return nil, nil
		}
		if a.fields == nil {
			return doc, nil
		}
		p, err := query.Project(doc, a.fields, w.env)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		return p, nil
	}
	if a.remove {
		deleted, err := w.deleteMatchingWith(a.query, true, a.sort, stmtOptions{hint: a.hint, collation: a.collation, hasCollation: a.hasCollation})
		if err != nil {
			return nil, err
		}
		leo := bson.D{{Key: "n", Value: int32(len(deleted))}}
		if len(deleted) > 0 {
			if value, err = project(deleted[0]); err != nil {
				return nil, err
			}
		}
		return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: value}}, nil
	}
	out, err := w.update(updateSpec{q: a.query, u: a.update, upsert: a.upsert, arrayFilters: a.arrayFilters, sort: a.sort, hint: a.hint,
		collation: a.collation, hasCollation: a.hasCollation})
	if err != nil {
		return nil, err
	}
	var leo bson.D
	switch {
	case out.upserted:
		leo = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: false},
			{Key: "upserted", Value: out.upsertedID}}
		if a.returnNew {
			value, err = project(out.post)
		}
	case out.matched > 0:
		leo = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: true}}
		if a.returnNew {
			value, err = project(out.post)
		} else {
			value, err = project(out.pre)
		}
	default:
		leo = bson.D{{Key: "n", Value: int32(0)}, {Key: "updatedExisting", Value: false}}
	}
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: value}}, nil
}
