package mongosim

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// Codes of views.
const (
	codeCommandNotSupportedOnView = 166
	codeOptionNotSupportedOnView  = 167
	codeViewDepthLimitExceeded    = 149
)

// maxViewDepth is the longest chain of views on views a server resolves.
const maxViewDepth = 20

// userView is a read-only view: a named aggregation pipeline over another collection or view
// of the same database, evaluated on every read. Guarded by engine.mu; immutable once stored.
type userView struct {
	db, name string
	viewOn   string
	pipeline bson.A
	compiled *query.Pipeline
}

// userViewLocked returns the view db.name, or nil. Caller holds e.mu.
func (e *engine) userViewLocked(db, name string) *userView {
	d := e.dbs[db]
	if d == nil || d.views == nil {
		return nil
	}
	return d.views[name]
}

// errIsView is a server's refusal of a command that needs a collection on a view.
func errIsView(db, name string) *cmdError {
	return errorf(codeCommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", db, name)
}

// viewWriteErrorLocked is the error of a write to db.coll when it is a view, else nil.
// Caller holds e.mu.
func (e *engine) viewWriteErrorLocked(db, coll string) *cmdError {
	if e.userViewLocked(db, coll) != nil {
		return errIsView(db, coll)
	}
	return nil
}

// createView runs create with viewOn (and pipeline): the view is stored in the database's
// catalog and a "create" oplog entry is logged, shown to change streams with
// showExpandedEvents as a server 6.0+ does ({operationType: "create", operationDescription:
// {viewOn, pipeline}}).
func (s *Server) createView(c *command, name string) (bson.D, error) {
	if c.InTransaction() {
		return nil, errorf(codeOperationNotSupportedInTransaction, "Cannot create a view in a multi-document transaction.")
	}
	v := &userView{db: c.DB, name: name, pipeline: bson.A{}}
	for _, f := range c.Body[1:] {
		if genericCommandFields[f.Key] {
			continue
		}
		switch f.Key {
		case "viewOn":
			on, ok := f.Value.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'create.viewOn' is the wrong type '%s', expected type 'string'", typeName(f.Value))
			}
			if on == "" {
				return nil, errorf(codeBadValue, "'viewOn' cannot be empty")
			}
			v.viewOn = on
		case "pipeline":
			p, ok := f.Value.(bson.A)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'create.pipeline' is the wrong type '%s', expected type 'array'", typeName(f.Value))
			}
			v.pipeline = p
		case "collation":
			if !isSimpleCollation(f.Value) {
				return nil, unsupported("views with a collation (create option 'collation')")
			}
		default:
			return nil, errorf(codeInvalidOptions, "option '%s' is not supported when creating a view", f.Key)
		}
	}
	for _, st := range v.pipeline {
		sd, ok := st.(bson.D)
		if !ok || len(sd) != 1 {
			return nil, errorf(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		switch sd[0].Key {
		case "$out", "$merge", "$changeStream":
			return nil, errorf(codeOptionNotSupportedOnView, "%s cannot be used in a view definition", sd[0].Key)
		}
	}
	p, err := query.CompilePipeline(v.pipeline)
	if err != nil {
		return nil, readQueryErr(err)
	}
	v.compiled = p
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.collLocked(c.DB, name) != nil || e.userViewLocked(c.DB, name) != nil {
		return nil, errorf(codeNamespaceExists, "Namespace %s.%s already exists", c.DB, name)
	}
	depth := 1
	for on := v.viewOn; ; depth++ {
		u := e.userViewLocked(c.DB, on)
		if u == nil {
			break
		}
		if depth >= maxViewDepth {
			return nil, errorf(codeViewDepthLimitExceeded, "View depth too deep or view cycle detected. Maximum depth is %d", maxViewDepth)
		}
		on = u.viewOn
	}
	d := e.dbs[c.DB]
	if d == nil {
		d = &database{name: c.DB, colls: make(map[string]*collection)}
		e.dbs[c.DB] = d
	}
	if d.views == nil {
		d.views = make(map[string]*userView)
	}
	d.views[name] = v
	// A server logs the creation, and a change stream with showExpandedEvents reports it as a
	// create event whose operationDescription holds the definition (no collectionUUID: a view
	// has none). Without it a client waiting for that event waits forever.
	e.logLocked(&oplogEntry{op: "create", db: c.DB, coll: name, ts: e.clock.tick(), opDesc: bson.D{
		{Key: "viewOn", Value: v.viewOn}, {Key: "pipeline", Value: slices.Clone(v.pipeline)}}})
	return bson.D{}, nil
}

// dropViewLocked removes the view db.name; false if there is none. Caller holds e.mu.
func (e *engine) dropViewLocked(db, name string) bool {
	d := e.dbs[db]
	if d == nil || d.views[name] == nil {
		return false
	}
	delete(d.views, name)
	if len(d.colls) == 0 && len(d.views) == 0 {
		delete(e.dbs, db)
	}
	return true
}

// viewDocsLocked returns the documents a read of db.name sees when it is a view: the view's
// pipeline run over what its source yields (a collection, seen as the command sees it, or
// another view). ok is false when db.name is no view. Caller holds e.mu.
func (e *engine) viewDocsLocked(c *command, db, name string) (docs []bson.D, ok bool, err error) {
	v := e.userViewLocked(db, name)
	if v == nil {
		return nil, false, nil
	}
	chain := []*userView{v}
	for {
		u := e.userViewLocked(db, chain[len(chain)-1].viewOn)
		if u == nil {
			break
		}
		if len(chain) >= maxViewDepth {
			return nil, true, errorf(codeViewDepthLimitExceeded, "View depth too deep or view cycle detected. Maximum depth is %d", maxViewDepth)
		}
		chain = append(chain, u)
	}
	if col := e.viewLocked(c, db, chain[len(chain)-1].viewOn); col != nil {
		docs = make([]bson.D, 0, col.count())
		col.scan(func(d bson.D) bool {
			docs = append(docs, d)
			return true
		})
	}
	env := &query.Env{Now: e.s.opts.Now(), ClusterTime: e.clock.last()}
	for i := len(chain) - 1; i >= 0; i-- {
		if docs, err = chain[i].compiled.Run(docs, env); err != nil {
			return nil, true, readQueryErr(err)
		}
	}
	return docs, true, nil
}

// viewInfo is the listCollections document of a view.
func viewInfo(v *userView) bson.D {
	return bson.D{
		{Key: "name", Value: v.name},
		{Key: "type", Value: "view"},
		{Key: "options", Value: bson.D{{Key: "viewOn", Value: v.viewOn}, {Key: "pipeline", Value: slices.Clone(v.pipeline)}}},
		{Key: "info", Value: bson.D{{Key: "readOnly", Value: true}}},
	}
}
