package mongosim

import (
	"slices"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindWrite, cmdCreate, "create")
	registerCommand(kindWrite, cmdDrop, "drop")
	registerCommand(kindWrite, cmdDropDatabase, "dropDatabase")
	registerCommand(kindWrite, cmdRenameCollection, "renameCollection")
	registerCommand(kindWrite, cmdCollMod, "collMod")
	registerCommand(kindRead, cmdListCollections, "listCollections")
	registerCommand(kindRead, cmdListDatabases, "listDatabases")
}

// database is one database of the catalog. It exists while it has collections: dropping
// the last collection removes it, as listDatabases on a real server shows. Guarded by engine.mu.
type database struct {
	name  string
	colls map[string]*collection
	views map[string]*userView // views.go; nil until the first view
}

// collLocked returns the committed collection db.coll, or nil. Caller holds e.mu.
func (e *engine) collLocked(db, coll string) *collection {
	d := e.dbs[db]
	if d == nil {
		return nil
	}
	return d.colls[coll]
}

// viewLocked returns the collection a command sees: inside a multi-document transaction the
// transaction's private view of db.coll (a snapshot taken at the transaction's first access
// to the collection, plus its own writes), else the committed collection; nil if absent. A
// command carrying startTransaction starts the transaction. Caller holds e.mu.
func (e *engine) viewLocked(c *command, db, coll string) *collection {
	if c != nil && c.InTransaction() {
		if t, err := e.txnForCommandLocked(c); err == nil {
			if tv, _ := t.viewFor(e, db, coll, false); tv != nil {
				return tv.view
			}
		}
	}
	return e.collLocked(db, coll)
}

// addCollectionLocked stores a new collection in the catalog and logs its "create" entry
// (shown to change streams with showExpandedEvents). entry, when non-nil, is used instead of a
// fresh one (transactions pass theirs). Caller holds e.mu.
func (e *engine) addCollectionLocked(coll *collection, entry *oplogEntry) {
	d := e.dbs[coll.db]
	if d == nil {
		d = &database{name: coll.db, colls: make(map[string]*collection)}
		e.dbs[coll.db] = d
	}
	d.colls[coll.name] = coll
	if entry == nil {
		entry = createEntry(coll)
		entry.ts = e.clock.tick()
		e.logLocked(entry)
	}
}

// createEntry builds the oplog entry of a collection creation.
func createEntry(coll *collection) *oplogEntry {
	desc := bson.D{{Key: "idIndex", Value: coll.indexes[0].spec}}
	if len(coll.options) > 0 {
		desc = append(bson.D{}, append(coll.options, desc...)...)
	}
	return &oplogEntry{op: "create", db: coll.db, coll: coll.name, collUUID: coll.uuid, opDesc: desc}
}

// removeCollectionLocked takes db.coll out of the catalog (no oplog entry). Caller holds e.mu.
func (e *engine) removeCollectionLocked(db, coll string) {
	d := e.dbs[db]
	if d == nil {
		return
	}
	delete(d.colls, coll)
	if len(d.colls) == 0 && len(d.views) == 0 {
		delete(e.dbs, db)
	}
}

// genericCommandFields are fields any command may carry that catalog commands ignore.
var genericCommandFields = map[string]bool{
	"$db": true, "lsid": true, "txnNumber": true, "autocommit": true, "startTransaction": true,
	"$clusterTime": true, "writeConcern": true, "readConcern": true, "comment": true,
	"maxTimeMS": true, "$readPreference": true, "apiVersion": true, "apiStrict": true,
	"apiDeprecationErrors": true, "$audit": true, "$client": true, "mayBypassWriteBlocking": true,
}

// collectionArg returns the collection named by the command's first value, validated.
func collectionArg(c *command) (string, *cmdError) {
	v := c.Body[0].Value
	name, ok := v.(string)
	if !ok {
		return "", errorf(codeInvalidNamespace, "collection name has invalid type %s", typeName(v))
	}
	if name == "" {
		return "", errorf(codeInvalidNamespace, "Invalid namespace specified '%s.'", c.DB)
	}
	return name, nil
}

// validCollName checks a namespace for creation.
func validCollName(db, name string) *cmdError {
	if db == "" || strings.ContainsAny(db, "/\\. \"$") {
		return errorf(codeInvalidNamespace, "Invalid database name: '%s'", db)
	}
	if name == "" || strings.Contains(name, "$") || strings.HasPrefix(name, ".") || strings.ContainsRune(name, 0) {
		return errorf(codeInvalidNamespace, "Invalid collection name: %s", name)
	}
	if len(db)+1+len(name) > 255 {
		return errorf(codeInvalidNamespace, "Fully qualified namespace is too long. Namespace: %s.%s Max: 255", db, name)
	}
	return nil
}

// noTxn rejects catalog commands inside transactions, as real servers do.
func noTxn(c *command) *cmdError {
	if c.InTransaction() {
		return errorf(263, "Cannot run '%s' in a multi-document transaction.", c.Name)
	}
	return nil
}

func cmdCreate(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	if err := validCollName(c.DB, name); err != nil {
		return nil, err
	}
	if _, ok := c.Arg("viewOn"); ok {
		return s.createView(c, name) // views.go
	}
	opts := bson.D{}
	pre := false
	var defaultCol *collation
	var kindFields bson.D
	for _, f := range c.Body[1:] {
		if genericCommandFields[f.Key] {
			continue
		}
		switch f.Key {
		case "changeStreamPreAndPostImages":
			enabled, err := preImagesOption(f.Value)
			if err != nil {
				return nil, err
			}
			pre = enabled
		case "capped", "validator", "validationLevel", "validationAction", "size", "max",
			"timeseries", "expireAfterSeconds", "clusteredIndex":
			kindFields = append(kindFields, f) // collkind.go
			continue
		case "autoIndexId", "flags":
			continue
		case "idIndex":
			continue
		case "collation":
			col, err := parseCollation(f.Value)
			if err != nil {
				return nil, err
			}
			if col == nil {
				continue
			}
			defaultCol = col
			f.Value = col.spec
		case "pipeline":
			return nil, errorf(codeBadValue, "'pipeline' requires 'viewOn' to also be specified")
		default:
			return nil, unsupported("the create option '%s'", f.Key)
		}
		opts = append(opts, f)
	}
	kind, kindOpts, kerr := parseCollKind(kindFields)
	if kerr != nil {
		return nil, kerr
	}
	opts = append(kindOpts, opts...)
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.collLocked(c.DB, name) != nil {
		return nil, errorf(codeNamespaceExists, "Collection %s.%s already exists.", c.DB, name)
	}
	if e.userViewLocked(c.DB, name) != nil {
		return nil, errorf(codeNamespaceExists, "Namespace %s.%s already exists", c.DB, name)
	}
	if c.InTransaction() {
		// Created in the transaction's view; it and its create event appear at commit.
		t, err := e.txnForCommandLocked(c)
		if err != nil {
			return nil, err
		}
		if _, had := t.views[c.DB+"."+name]; had {
			return nil, errorf(codeNamespaceExists, "Collection %s.%s already exists.", c.DB, name)
		}
		tv, err := t.viewFor(e, c.DB, name, true)
		if err != nil {
			return nil, err
		}
		tv.view.options, tv.view.preAndPostImages = opts, pre
		tv.view.setKind(kind)
		if defaultCol != nil {
			tv.view.collation = defaultCol
			e.collationsUsed.Store(true)
		}
		t.ops[len(t.ops)-1].entry = createEntry(tv.view) // with the options
		return bson.D{}, nil
	}
	coll := newCollection(c.DB, name)
	coll.options = opts
	coll.preAndPostImages = pre
	coll.setKind(kind)
	if defaultCol != nil {
		coll.collation = defaultCol
		e.collationsUsed.Store(true)
	}
	e.addCollectionLocked(coll, nil)
	return bson.D{}, nil
}

// preImagesOption parses {enabled: bool}.
func preImagesOption(v any) (bool, *cmdError) {
	d, ok := v.(bson.D)
	if !ok {
		return false, errorf(codeTypeMismatch, "BSON field 'changeStreamPreAndPostImages' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	en, ok := lookupD(d, "enabled")
	b, isBool := en.(bool)
	if !ok || !isBool {
		return false, errorf(codeFailedToParse, "BSON field 'changeStreamPreAndPostImages.enabled' is missing but a required field")
	}
	return b, nil
}

func cmdDrop(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	if err := noTxn(c); err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	coll := e.collLocked(c.DB, name)
	if coll == nil {
		if e.dropViewLocked(c.DB, name) { // views.go
			return bson.D{{Key: "ns", Value: c.DB + "." + name}}, nil
		}
		return nil, errorf(codeNamespaceNotFound, "ns not found")
	}
	n := int32(len(coll.indexes))
	e.dropCollectionLocked(coll)
	return bson.D{{Key: "nIndexesWas", Value: n}, {Key: "ns", Value: coll.ns()}}, nil
}

// dropCollectionLocked removes coll and logs its "drop" entry. Caller holds e.mu.
func (e *engine) dropCollectionLocked(coll *collection) {
	e.removeCollectionLocked(coll.db, coll.name)
	e.logLocked(&oplogEntry{ts: e.clock.tick(), op: "drop", db: coll.db, coll: coll.name, collUUID: coll.uuid, dropped: coll})
}

func cmdDropDatabase(s *Server, c *command) (bson.D, error) {
	if err := noTxn(c); err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.dbs[c.DB]
	if d == nil {
		return bson.D{}, nil
	}
	names := make([]string, 0, len(d.colls))
	for n := range d.colls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.dropCollectionLocked(d.colls[n])
	}
	delete(e.dbs, c.DB)
	e.logLocked(&oplogEntry{ts: e.clock.tick(), op: "dropDatabase", db: c.DB})
	return bson.D{}, nil
}

// splitNS splits "db.coll" at the first dot.
func splitNS(ns string) (db, coll string, ok bool) {
	i := strings.IndexByte(ns, '.')
	if i <= 0 || i == len(ns)-1 {
		return "", "", false
	}
	return ns[:i], ns[i+1:], true
}

func cmdRenameCollection(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "renameCollection may only be run against the admin database.")
	}
	if err := noTxn(c); err != nil {
		return nil, err
	}
	from, _ := c.Body[0].Value.(string)
	toV, _ := c.Arg("to")
	to, _ := toV.(string)
	fdb, fcoll, ok := splitNS(from)
	if !ok {
		return nil, errorf(codeInvalidNamespace, "Invalid source namespace: %s", from)
	}
	tdb, tcoll, ok := splitNS(to)
	if !ok {
		return nil, errorf(codeInvalidNamespace, "Invalid target namespace: %s", to)
	}
	if err := validCollName(tdb, tcoll); err != nil {
		return nil, err
	}
	dropTarget := false
	if v, ok := c.Arg("dropTarget"); ok {
		dropTarget = truthy(v)
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	src := e.collLocked(fdb, fcoll)
	if src == nil && e.userViewLocked(fdb, fcoll) != nil {
		return nil, errIsView(fdb, fcoll)
	}
	if e.userViewLocked(tdb, tcoll) != nil {
		return nil, errorf(codeNamespaceExists, "a view already exists with that name: %s", to)
	}
	if src == nil {
		return nil, errorf(codeNamespaceNotFound, "Source collection %s does not exist", from)
	}
	if from == to {
		return nil, errorf(codeIllegalOperation, "Can't rename a collection to itself")
	}
	if e.collLocked(tdb, tcoll) != nil && !dropTarget {
		return nil, errorf(codeNamespaceExists, "target namespace exists")
	}
	e.renameLocked(src, tdb, tcoll)
	return bson.D{}, nil
}

// renameLocked moves src to tdb.tcoll, dropping a collection already there, and logs the
// drop and the "rename" entry. Caller holds e.mu.
func (e *engine) renameLocked(src *collection, tdb, tcoll string) {
	fdb, fcoll := src.db, src.name
	desc := bson.D{{Key: "to", Value: bson.D{{Key: "db", Value: tdb}, {Key: "coll", Value: tcoll}}}}
	if dst := e.collLocked(tdb, tcoll); dst != nil {
		e.dropCollectionLocked(dst)
		desc = append(desc, bson.E{Key: "dropTarget", Value: dst.uuid})
	}
	e.removeCollectionLocked(fdb, fcoll)
	// The renamed collection keeps its documents and UUID; the catalog entry is a new
	// object so that transactions holding the old one see a conflict.
	moved := *src
	moved.db, moved.name = tdb, tcoll
	d := e.dbs[tdb]
	if d == nil {
		d = &database{name: tdb, colls: make(map[string]*collection)}
		e.dbs[tdb] = d
	}
	d.colls[tcoll] = &moved
	e.logLocked(&oplogEntry{ts: e.clock.tick(), op: "rename", db: fdb, coll: fcoll, collUUID: src.uuid,
		toDB: tdb, toColl: tcoll, opDesc: desc})
}

func cmdCollMod(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	if err := noTxn(c); err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	coll := e.collLocked(c.DB, name)
	if coll == nil && e.userViewLocked(c.DB, name) != nil {
		return nil, unsupported("collMod of a view")
	}
	if coll == nil {
		return nil, errorf(codeNamespaceNotFound, "ns does not exist: %s.%s", c.DB, name)
	}
	reply := bson.D{}
	desc := bson.D{}
	pre := coll.preAndPostImages
	var idxChange *indexChange
	var kindMods bson.D
	for _, f := range c.Body[1:] {
		if genericCommandFields[f.Key] {
			continue
		}
		switch f.Key {
		case "changeStreamPreAndPostImages":
			en, err := preImagesOption(f.Value)
			if err != nil {
				return nil, err
			}
			pre = en
			desc = append(desc, f)
		case "index":
			spec, ok := f.Value.(bson.D)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'collMod.index' is the wrong type '%s', expected type 'object'", typeName(f.Value))
			}
			ch, err := collModIndex(coll, spec)
			if err != nil {
				return nil, err
			}
			idxChange = ch
			desc = append(desc, f)
		case "validator", "validationLevel", "validationAction":
			kindMods = append(kindMods, f) // collkind.go
			desc = append(desc, f)
		default:
			return nil, unsupported("the collMod option '%s'", f.Key)
		}
	}
	if len(kindMods) > 0 {
		if err := coll.modifyValidation(kindMods); err != nil {
			return nil, err
		}
	}
	coll.preAndPostImages = pre
	coll.options = slices.DeleteFunc(slices.Clone(coll.options), func(o bson.E) bool { return o.Key == "changeStreamPreAndPostImages" })
	if pre {
		coll.options = append(coll.options, bson.E{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}})
	}
	if idxChange != nil {
		r, err := applyIndexChange(coll, idxChange)
		if err != nil {
			return nil, err
		}
		reply = append(reply, r...)
	}
	e.logLocked(&oplogEntry{ts: e.clock.tick(), op: "modify", db: coll.db, coll: coll.name,
		collUUID: coll.uuid, opDesc: desc})
	return reply, nil
}

// indexChange is what collMod's index option changes on one index.
type indexChange struct {
	ix            *index
	ttl           *float64 // expireAfterSeconds
	prepareUnique *bool
	unique        bool // convert to unique (needs prepareUnique)
}

// collModIndex parses collMod's index: {name|keyPattern, expireAfterSeconds, prepareUnique,
// unique: true}.
func collModIndex(coll *collection, spec bson.D) (*indexChange, *cmdError) {
	ch := &indexChange{}
	for _, f := range spec {
		switch f.Key {
		case "name":
			n, _ := f.Value.(string)
			ch.ix = coll.indexByName(n)
		case "keyPattern":
			kp, _ := f.Value.(bson.D)
			for _, o := range coll.indexes {
				if sameKey(o.key, kp) {
					ch.ix = o
				}
			}
		case "expireAfterSeconds":
			n, ok := toFloat(f.Value)
			if !ok || n < 0 {
				return nil, errorf(codeBadValue, "TTL index 'expireAfterSeconds' option must be numeric and non-negative")
			}
			ch.ttl = &n
		case "prepareUnique":
			b, ok := f.Value.(bool)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'collMod.index.prepareUnique' is the wrong type '%s', expected type 'bool'", typeName(f.Value))
			}
			ch.prepareUnique = &b
		case "unique":
			if b, ok := f.Value.(bool); !ok || !b {
				return nil, errorf(codeBadValue, "The field 'unique' can only be set to true (converting an index to unique)")
			}
			ch.unique = true
		default:
			return nil, unsupported("the collMod index option '%s'", f.Key)
		}
	}
	if ch.ix == nil {
		return nil, errorf(codeIndexNotFound, "cannot find index %s for ns %s", formatKeyValue(spec), coll.ns())
	}
	if ch.ttl == nil && ch.prepareUnique == nil && !ch.unique {
		return nil, errorf(codeInvalidOptions, "no expireAfterSeconds, prepareUnique or unique field to update")
	}
	if ch.ttl != nil && !ch.ix.ttl {
		return nil, errorf(codeInvalidOptions, "no expireAfterSeconds field to update")
	}
	if ch.ix.isID && (ch.prepareUnique != nil || ch.unique) {
		return nil, errorf(codeInvalidOptions, "The _id index is always unique")
	}
	if ch.unique && !ch.ix.unique {
		prepared := ch.ix.prepareUnique
		if ch.prepareUnique != nil {
			prepared = *ch.prepareUnique
		}
		if !prepared {
			return nil, errorf(codeInvalidOptions, "Cannot make index unique with 'prepareUnique: false'. Run collMod to set it first.")
		}
	}
	return ch, nil
}

// applyIndexChange replaces ch.ix in coll by its changed copy (indexes are copy-on-write) and
// returns the reply fields. Converting to unique fails with CannotConvertIndexToUnique (359)
// when documents share a key; nothing changes then.
func applyIndexChange(coll *collection, ch *indexChange) (bson.D, *cmdError) {
	old := ch.ix
	nix := old.clone()
	nix.spec = slices.Clone(nix.spec)
	setSpec := func(key string, v any) {
		for i := range nix.spec {
			if nix.spec[i].Key == key {
				nix.spec[i].Value = v
				return
			}
		}
		nix.spec = append(nix.spec, bson.E{Key: key, Value: v})
	}
	var reply bson.D
	if ch.ttl != nil {
		reply = append(reply, bson.E{Key: "expireAfterSeconds_old", Value: int64(old.ttlSeconds)},
			bson.E{Key: "expireAfterSeconds_new", Value: int64(*ch.ttl)})
		nix.ttlSeconds = *ch.ttl
		setSpec("expireAfterSeconds", int64(*ch.ttl))
	}
	if ch.prepareUnique != nil && *ch.prepareUnique != old.prepareUnique {
		reply = append(reply, bson.E{Key: "prepareUnique_old", Value: old.prepareUnique},
			bson.E{Key: "prepareUnique_new", Value: *ch.prepareUnique})
		nix.prepareUnique = *ch.prepareUnique
		if nix.prepareUnique {
			setSpec("prepareUnique", true)
		} else {
			nix.spec = slices.DeleteFunc(nix.spec, func(e bson.E) bool { return e.Key == "prepareUnique" })
		}
	}
	if ch.unique && !old.unique {
		nix.unique, nix.prepareUnique = true, false
		nix.entries = make(map[string]string)
		if err := coll.buildIndex(nix); err != nil {
			return nil, errCannotConvertToUnique(coll, nix)
		}
		nix.spec = slices.DeleteFunc(nix.spec, func(e bson.E) bool { return e.Key == "prepareUnique" })
		setSpec("unique", true)
		reply = append(reply, bson.E{Key: "unique_new", Value: true})
	}
	for i, o := range coll.indexes {
		if o == old {
			coll.indexes[i] = nix
		}
	}
	return reply, nil
}

// collectionInfo is the listCollections document of coll.
func collectionInfo(coll *collection) bson.D {
	return kindCollectionInfo(coll, bson.D{
		{Key: "name", Value: coll.name},
		{Key: "type", Value: "collection"},
		{Key: "options", Value: slices.Clone(coll.options)},
		{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: coll.uuid}}},
		{Key: "idIndex", Value: coll.indexes[0].spec},
	})
}

func cmdListCollections(s *Server, c *command) (bson.D, error) {
	var filter *query.Filter
	if fv, ok := c.Arg("filter"); ok && fv != nil {
		fd, ok := fv.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'listCollections.filter' is the wrong type '%s', expected type 'object'", typeName(fv))
		}
		f, err := query.CompileFilter(fd)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		filter = f
	}
	nameOnly := false
	if v, ok := c.Arg("nameOnly"); ok {
		nameOnly = truthy(v)
	}
	e := s.eng
	e.mu.Lock()
	var infos []bson.D
	if d := e.dbs[c.DB]; d != nil {
		for _, coll := range d.colls {
			infos = append(infos, collectionInfo(coll))
		}
		for _, v := range d.views {
			infos = append(infos, viewInfo(v))
		}
	}
	if c.DB == "local" {
		infos = append(infos, e.oplogCollectionInfoLocked()) // oplogview.go
	}
	e.mu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i][0].Value.(string) < infos[j][0].Value.(string) })
	docs := make([]any, 0, len(infos))
	for _, info := range infos {
		if filter != nil {
			ok, err := filter.Match(info, nil)
			if err != nil {
				return nil, qerrToCmd(err)
			}
			if !ok {
				continue
			}
		}
		if nameOnly {
			info = info[:2:2]
		}
		docs = append(docs, info)
	}
	n, _ := batchSizeArg(c)
	return e.firstBatch(c, newStaticCursor(c.DB+".$cmd.listCollections", docs), int(n))
}

func cmdListDatabases(s *Server, c *command) (bson.D, error) {
	if c.DB != "admin" {
		return nil, errorf(codeUnauthorized, "listDatabases may only be run against the admin database.")
	}
	var filter *query.Filter
	if fv, ok := c.Arg("filter"); ok && fv != nil {
		fd, ok := fv.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'listDatabases.filter' is the wrong type '%s', expected type 'object'", typeName(fv))
		}
		f, err := query.CompileFilter(fd)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		filter = f
	}
	nameOnly := false
	if v, ok := c.Arg("nameOnly"); ok {
		nameOnly = truthy(v)
	}
	e := s.eng
	e.mu.Lock()
	var dbs []bson.D
	for name, d := range e.dbs {
		var size int64
		for _, coll := range d.colls {
			size += coll.size
		}
		dbs = append(dbs, bson.D{{Key: "name", Value: name}, {Key: "sizeOnDisk", Value: size}, {Key: "empty", Value: false}})
	}
	e.mu.Unlock()
	sort.Slice(dbs, func(i, j int) bool { return dbs[i][0].Value.(string) < dbs[j][0].Value.(string) })
	out := bson.A{}
	var total int64
	for _, d := range dbs {
		if filter != nil {
			ok, err := filter.Match(d, nil)
			if err != nil {
				return nil, qerrToCmd(err)
			}
			if !ok {
				continue
			}
		}
		total += d[1].Value.(int64)
		if nameOnly {
			d = d[:1:1]
		}
		out = append(out, d)
	}
	reply := bson.D{{Key: "databases", Value: out}}
	if !nameOnly {
		reply = append(reply, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return reply, nil
}

// qerrToCmd converts an error of the query package to a command error with its code.
func qerrToCmd(err error) *cmdError {
	if err == nil {
		return nil
	}
	if qe, ok := err.(*query.Error); ok {
		return &cmdError{Code: qe.Code, Msg: qe.Msg}
	}
	if ce, ok := err.(*cmdError); ok {
		return ce
	}
	return errorf(codeInternalError, "%v", err)
}
