package mongosim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindWrite, cmdCreateIndexes, "createIndexes")
	registerCommand(kindWrite, cmdDropIndexes, "dropIndexes", "deleteIndexes")
	registerCommand(kindRead, cmdListIndexes, "listIndexes")
}

// index is one index of a collection. Only what the simulator enforces is kept: unique
// indexes hold their keys (for DuplicateKey detection); other indexes are metadata (listIndexes,
// TTL). There is no query planner, so indexes never change query results.
type index struct {
	name        string
	key         bson.D // key pattern, e.g. {email: 1}
	spec        bson.D // the document listIndexes reports: v, key, name, then the options
	isID        bool   // the _id_ index (its keys live in collection.byID)
	unique      bool
	sparse      bool
	partialExpr bson.D        // partialFilterExpression, nil when none
	partial     *query.Filter // compiled partialExpr
	ttl         bool          // expireAfterSeconds is set
	ttlSeconds  float64       // expireAfterSeconds
	// prepareUnique (collMod, createIndexes): new duplicate keys are refused, existing ones
	// stay, until the index is converted to unique.
	prepareUnique bool
	// collation compares the key's strings (nil: binary); explicitSimple records a
	// {locale: "simple"} that overrides the collection's default.
	collation      *collation
	explicitSimple bool

	// entries maps a key (indexKey.hash) to the _id hash of the document holding it;
	// maintained for unique indexes only.
	entries map[string]string
	// shared: entries may be shared with a clone's (or the clone's original's); own copies
	// them before a write.
	shared bool
}

// indexKey is one key of a document in an index: one value per key-pattern field.
type indexKey struct {
	hash string
	vals []any
}

func newIDIndex() *index {
	key := bson.D{{Key: "_id", Value: int32(1)}}
	return &index{
		name:   "_id_",
		key:    key,
		spec:   bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: key}, {Key: "name", Value: "_id_"}},
		isID:   true,
		unique: true,
	}
}

// clone returns a copy that shares ix's entries copy-on-write: both are marked shared, and
// whichever writes first copies them (own). A transaction's view of a collection with
// secondary indexes then costs no index copy until it writes. Caller holds e.mu, as for every
// index access.
func (ix *index) clone() *index {
	cp := *ix
	if ix.entries != nil {
		ix.shared, cp.shared = true, true
	}
	return &cp
}

// own makes ix's entries its own before a write (see clone).
func (ix *index) own() {
	if !ix.shared {
		return
	}
	ix.shared = false
	if ix.entries == nil {
		return
	}
	m := make(map[string]string, len(ix.entries))
	for k, v := range ix.entries {
		m[k] = v
	}
	ix.entries = m
}

// keysFor returns the distinct keys doc has in ix: nil when the index skips the document
// (partial filter not matched, or sparse with every key field missing). A missing field
// keys as null; an array keys once per element (multikey), an empty array as undefined.
// Two array-valued fields in one compound key fail with CannotIndexParallelArrays (171).
func (ix *index) keysFor(doc bson.D) ([]indexKey, *cmdError) {
	if ix.partial != nil {
		ok, err := ix.partial.Match(doc, nil)
		if err != nil {
			return nil, qerrToCmd(err)
		}
		if !ok {
			return nil, nil
		}
	}
	perField := make([][]any, len(ix.key))
	anyFound := false
	multi := ""
	for i, f := range ix.key {
		var vals []any
		found := false
		keyValues(doc, strings.Split(f.Key, "."), &vals, &found)
		if found {
			anyFound = true
		}
		vals = dedupe(vals, ix.collation.keyFunc())
		if len(vals) > 1 {
			if multi != "" {
				return nil, errorf(171, "cannot index parallel arrays [%s] [%s]", f.Key, multi)
			}
			multi = f.Key
		}
		perField[i] = vals
	}
	if ix.sparse && !anyFound {
		return nil, nil
	}
	// Cartesian product (at most one field has more than one value).
	keys := []indexKey{{}}
	for _, vals := range perField {
		next := make([]indexKey, 0, len(keys)*len(vals))
		for _, k := range keys {
			for _, v := range vals {
				h := query.HashKey(query.CollateValue(v, ix.collation.keyFunc()))
				next = append(next, indexKey{
					hash: k.hash + strconv.Itoa(len(h)) + ":" + h,
					vals: append(slices.Clip(k.vals), v),
				})
			}
		}
		keys = next
	}
	return keys, nil
}

// keyValues collects the values a dotted index path reaches in v, fanning out through arrays.
// found reports whether the path reached any value at all (for sparse indexes).
func keyValues(v any, parts []string, out *[]any, found *bool) {
	if len(parts) == 0 {
		*found = true
		if arr, ok := v.(bson.A); ok {
			if len(arr) == 0 {
				*out = append(*out, bson.Undefined{})
				return
			}
			*out = append(*out, arr...)
			return
		}
		*out = append(*out, v)
		return
	}
	switch x := v.(type) {
	case bson.D:
		f, ok := lookupD(x, parts[0])
		if !ok {
			*out = append(*out, nil)
			return
		}
		keyValues(f, parts[1:], out, found)
	case bson.A:
		if n, err := strconv.Atoi(parts[0]); err == nil && n >= 0 && parts[0] == strconv.Itoa(n) {
			if n < len(x) {
				keyValues(x[n], parts[1:], out, found)
			} else {
				*out = append(*out, nil)
			}
			return
		}
		if len(x) == 0 {
			*out = append(*out, nil)
			return
		}
		for _, el := range x {
			if d, ok := el.(bson.D); ok {
				keyValues(d, parts, out, found)
			} else {
				*out = append(*out, nil)
			}
		}
	default:
		*out = append(*out, nil)
	}
}

func dedupe(vals []any, col query.Collate) []any {
	if len(vals) < 2 {
		return vals
	}
	seen := make(map[string]bool, len(vals))
	out := vals[:0:0]
	for _, v := range vals {
		h := query.HashKey(query.CollateValue(v, col))
		if !seen[h] {
			seen[h] = true
			out = append(out, v)
		}
	}
	return out
}

// formatKeyValue renders a key document the way the server prints it in DuplicateKey
// messages: { email: "a" }, { _id: ObjectId('…') }.
func formatKeyValue(d bson.D) string {
	var sb strings.Builder
	writeShellValue(&sb, d)
	return sb.String()
}

func writeShellValue(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case bson.D:
		if len(x) == 0 {
			sb.WriteString("{}")
			return
		}
		sb.WriteString("{ ")
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(e.Key)
			sb.WriteString(": ")
			writeShellValue(sb, e.Value)
		}
		sb.WriteString(" }")
	case bson.A:
		if len(x) == 0 {
			sb.WriteString("[]")
			return
		}
		sb.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeShellValue(sb, e)
		}
		sb.WriteString(" ]")
	case string:
		sb.WriteString(strconv.Quote(x))
	case nil:
		sb.WriteString("null")
	case bson.Undefined:
		sb.WriteString("undefined")
	case int32:
		sb.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		sb.WriteString(strconv.FormatInt(x, 10))
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			sb.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		} else {
			sb.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		}
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case bson.ObjectID:
		sb.WriteString("ObjectId('" + x.Hex() + "')")
	case bson.DateTime:
		sb.WriteString("new Date(" + strconv.FormatInt(int64(x), 10) + ")")
	case bson.Timestamp:
		fmt.Fprintf(sb, "Timestamp(%d, %d)", x.T, x.I)
	case bson.Decimal128:
		sb.WriteString("NumberDecimal(\"" + x.String() + "\")")
	case bson.Binary:
		fmt.Fprintf(sb, "BinData(%d, %X)", x.Subtype, x.Data)
	case bson.MinKey:
		sb.WriteString("MinKey")
	case bson.MaxKey:
		sb.WriteString("MaxKey")
	case bson.Regex:
		sb.WriteString("/" + x.Pattern + "/" + x.Options)
	default:
		fmt.Fprintf(sb, "%v", x)
	}
}

// defaultIndexName builds the name the drivers and server generate: fields and directions
// joined by "_" (email_1, s_1_t_-1).
func defaultIndexName(key bson.D) string {
	parts := make([]string, 0, 2*len(key))
	for _, e := range key {
		var sb strings.Builder
		writeShellValue(&sb, e.Value)
		v := strings.Trim(sb.String(), "\"")
		if f, ok := e.Value.(float64); ok && f == math.Trunc(f) {
			v = strconv.FormatInt(int64(f), 10)
		}
		parts = append(parts, e.Key, v)
	}
	return strings.Join(parts, "_")
}

// indexOptionFields are the index-spec fields the simulator accepts (beyond key and name).
var indexOptionFields = map[string]bool{
	"v": true, "unique": true, "sparse": true, "partialFilterExpression": true,
	"expireAfterSeconds": true, "background": true, "hidden": true, "collation": true,
	"prepareUnique": true,
}

// parseIndexSpec validates one createIndexes spec and builds the index (without keys).
func parseIndexSpec(raw any) (*index, *cmdError) {
	spec, ok := raw.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "The field 'indexes' must be an array of objects, but found %s", typeName(raw))
	}
	ix := &index{}
	keyV, ok := lookupD(spec, "key")
	if !ok {
		return nil, errorf(codeFailedToParse, "The 'key' field is a required property of an index specification")
	}
	key, ok := keyV.(bson.D)
	if !ok || len(key) == 0 {
		return nil, errorf(67, "Index keys cannot be empty.")
	}
	for _, f := range key {
		switch v := f.Value.(type) {
		case int32, int64, float64, int:
			n, _ := toFloat(v)
			if n == 0 || math.IsNaN(n) {
				return nil, errorf(67, "Values in the index key pattern can't be 0 or NaN: %s", formatKeyValue(key))
			}
		case string:
			if v != "hashed" {
				return nil, unsupported("%q indexes (index key %s)", v, formatKeyValue(key))
			}
		default:
			return nil, errorf(67, "Values in v:2 index key pattern cannot be of type %s. Only numbers > 0, numbers < 0, and strings are allowed.", typeName(v))
		}
		if f.Key == "" || strings.HasPrefix(f.Key, "$") && f.Key != "$**" {
			return nil, errorf(67, "Index key contains an illegal field name: %q", f.Key)
		}
		if strings.Contains(f.Key, "$**") {
			return nil, unsupported("wildcard indexes (index key %s)", formatKeyValue(key))
		}
	}
	ix.key = key
	if nv, ok := lookupD(spec, "name"); ok {
		name, ok := nv.(string)
		if !ok || name == "" {
			return nil, errorf(codeTypeMismatch, "The field 'name' must be a non-empty string")
		}
		ix.name = name
	} else {
		ix.name = defaultIndexName(key)
	}
	ix.spec = bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: key}, {Key: "name", Value: ix.name}}
	for _, f := range spec {
		switch f.Key {
		case "key", "name":
			continue
		case "v":
			n, _ := asInt64(f.Value)
			if n != 2 && n != 1 {
				return nil, errorf(codeBadValue, "Invalid index specification %s; cannot create an index with v=%d", formatKeyValue(spec), n)
			}
			continue
		case "background":
			continue // accepted and ignored, as on 4.2+ servers
		case "prepareUnique":
			ix.prepareUnique = truthy(f.Value)
			if !ix.prepareUnique {
				continue
			}
		case "unique":
			ix.unique = truthy(f.Value)
			if !ix.unique {
				continue
			}
		case "sparse":
			ix.sparse = truthy(f.Value)
		case "hidden":
			if truthy(f.Value) {
				return nil, unsupported("hidden indexes")
			}
		case "collation":
			col, err := parseCollation(f.Value)
			if err != nil {
				return nil, err
			}
			if col == nil {
				ix.explicitSimple = true
				continue
			}
			ix.collation = col
			f.Value = col.spec
		case "partialFilterExpression":
			pd, ok := f.Value.(bson.D)
			if !ok {
				return nil, errorf(codeTypeMismatch, "The field 'partialFilterExpression' must be an object, but got %s", typeName(f.Value))
			}
			flt, err := query.CompileFilter(pd)
			if err != nil {
				return nil, qerrToCmd(err)
			}
			ix.partialExpr, ix.partial = pd, flt
		case "expireAfterSeconds":
			n, ok := toFloat(f.Value)
			if !ok || n < 0 || math.IsNaN(n) {
				return nil, errorf(codeInvalidOptions, "TTL index 'expireAfterSeconds' option must be numeric and non-negative, but received: %v", f.Value)
			}
			if len(key) != 1 {
				return nil, errorf(67, "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s", formatKeyValue(spec))
			}
			if key[0].Key == "_id" {
				return nil, errorf(67, "The field 'expireAfterSeconds' is not valid for an _id index specification.")
			}
			ix.ttl, ix.ttlSeconds = true, n
		default:
			if !indexOptionFields[f.Key] {
				return nil, errorf(197, "The field '%s' is not valid for an index specification. Specification: %s", f.Key, formatKeyValue(spec))
			}
		}
		ix.spec = append(ix.spec, f)
	}
	if ix.name == "_id_" && len(key) == 1 && key[0].Key == "_id" {
		// The _id index always exists: a matching spec is "already exists". Other specs on
		// {_id: 1}, or named _id_, fail as conflicts in createIndexes.
		ix.isID, ix.unique = true, true
	}
	if ix.unique {
		ix.entries = make(map[string]string)
	}
	return ix, nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil:
		return false
	default:
		f, ok := toFloat(v)
		return !ok || f != 0
	}
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// isSimpleCollation reports whether a collation document is the default binary comparison.
func isSimpleCollation(v any) bool {
	d, ok := v.(bson.D)
	if !ok {
		return false
	}
	loc, _ := lookupD(d, "locale")
	return loc == "simple"
}

// sameOptions compares the options that distinguish two indexes on the same key.
func (ix *index) sameOptions(o *index) bool {
	return ix.unique == o.unique && ix.sparse == o.sparse && ix.ttl == o.ttl &&
		(!ix.ttl || ix.ttlSeconds == o.ttlSeconds) && samePartial(ix, o) && sameCollation(ix.collation, o.collation)
}

func samePartial(a, b *index) bool {
	if (a.partialExpr == nil) != (b.partialExpr == nil) {
		return false
	}
	return a.partialExpr == nil || query.HashKey(a.partialExpr) == query.HashKey(b.partialExpr)
}

func sameKey(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || query.HashKey(a[i].Value) != query.HashKey(b[i].Value) {
			return false
		}
	}
	return true
}

// buildIndexLocked fills ix's keys from the documents of coll: DuplicateKey when a unique
// index finds two documents with one key.
func (coll *collection) buildIndex(ix *index) *cmdError {
	if !ix.unique {
		return nil
	}
	var err *cmdError
	coll.scanSlots(func(s *docSlot) bool {
		keys, kerr := ix.keysFor(s.doc)
		if kerr != nil {
			err = kerr
			return false
		}
		for _, k := range keys {
			if holder, dup := ix.entries[k.hash]; dup && holder != s.key {
				err = coll.dupKeyError(ix, k.vals)
				return false
			}
			ix.own()
			ix.entries[k.hash] = s.key
		}
		return true
	})
	return err
}

// validateIndexKeys checks that every document can be keyed by ix (no parallel arrays) for
// non-unique indexes too, as the server's index build does.
func (coll *collection) validateIndexKeys(ix *index) *cmdError {
	var err *cmdError
	coll.scanSlots(func(s *docSlot) bool {
		_, err = ix.keysFor(s.doc)
		return err == nil
	})
	return err
}

func cmdCreateIndexes(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	iv, ok := c.Arg("indexes")
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field 'createIndexes.indexes' is missing but a required field")
	}
	arr, ok := iv.(bson.A)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'createIndexes.indexes' is the wrong type '%s', expected type 'array'", typeName(iv))
	}
	if len(arr) == 0 {
		return nil, errorf(codeBadValue, "Must specify at least one index to create")
	}
	reqs := make([]*index, 0, len(arr))
	for _, raw := range arr {
		ix, err := parseIndexSpec(raw)
		if err != nil {
			return nil, err
		}
		for _, o := range reqs {
			if o.name == ix.name && !(sameKey(o.key, ix.key) && o.sameOptions(ix)) {
				return nil, errorf(codeIndexKeySpecsConflict, "Two indexes in one createIndexes request have the same name: %s", ix.name)
			}
		}
		reqs = append(reqs, ix)
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.viewWriteErrorLocked(c.DB, name); err != nil {
		return nil, err
	}
	coll := e.collLocked(c.DB, name)
	var txn *transaction
	created := false
	if c.InTransaction() {
		// Inside a transaction: only on a collection the transaction creates (now, or earlier
		// with create or a first insert), and visible with it at commit.
		t, err := e.txnForCommandLocked(c)
		if err != nil {
			return nil, err
		}
		if coll != nil {
			return nil, errorf(codeOperationNotSupportedInTransaction, "Cannot create new indexes on existing collection %s.%s in a multi-document transaction.", c.DB, name)
		}
		_, had := t.views[c.DB+"."+name]
		tv, err := t.viewFor(e, c.DB, name, true)
		if err != nil {
			return nil, err
		}
		txn, coll, created = t, tv.view, !had
	} else if coll == nil {
		if err := validCollName(c.DB, name); err != nil {
			return nil, err
		}
		created = true
		coll = newCollection(c.DB, name)
	}
	before := len(coll.indexes)
	var toAdd []*index
	for _, ix := range reqs {
		if coll.collation != nil && ix.collation == nil && !ix.explicitSimple && !ix.isID {
			// An index without a collation takes the collection's default, as on a server.
			ix.collation = coll.collation
			ix.spec = append(slices.Clip(ix.spec), bson.E{Key: "collation", Value: coll.collation.spec})
		}
		exists := false
		for _, o := range append(slices.Clip(coll.indexes), toAdd...) {
			switch {
			case o.name == ix.name && sameKey(o.key, ix.key) && (o.isID || o.sameOptions(ix)):
				exists = true
			case o.name == ix.name && !sameKey(o.key, ix.key):
				return nil, errorf(codeIndexKeySpecsConflict,
					"An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
					formatKeyValue(ix.spec), formatKeyValue(o.spec))
			case o.name == ix.name:
				return nil, errorf(codeIndexOptionsConflict,
					"An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
					formatKeyValue(ix.spec), formatKeyValue(o.spec))
			case sameKey(o.key, ix.key) && samePartial(o, ix) && sameCollation(o.collation, ix.collation):
				return nil, errorf(codeIndexOptionsConflict, "Index already exists with a different name: %s", o.name)
			}
			if exists {
				break
			}
		}
		if exists {
			continue
		}
		if err := coll.validateIndexKeys(ix); err != nil {
			return nil, err
		}
		if err := coll.buildIndex(ix); err != nil {
			err.Msg = "Index build failed: " + err.Msg
			return nil, err
		}
		toAdd = append(toAdd, ix)
	}
	if len(toAdd) == 0 && !created {
		return bson.D{
			{Key: "numIndexesBefore", Value: int32(before)},
			{Key: "numIndexesAfter", Value: int32(before)},
			{Key: "note", Value: "all indexes already exist"},
		}, nil
	}
	if created && txn == nil {
		e.addCollectionLocked(coll, nil)
	}
	coll.indexes = append(coll.indexes, toAdd...)
	for _, ix := range toAdd {
		en := &oplogEntry{op: "createIndexes", db: coll.db, coll: coll.name,
			collUUID: coll.uuid, opDesc: bson.D{{Key: "indexes", Value: bson.A{ix.spec}}}}
		if txn != nil {
			txn.ops = append(txn.ops, txnOp{kind: "createIndexes", db: coll.db, coll: coll.name, index: ix, entry: en})
			continue
		}
		en.ts = e.clock.tick()
		e.logLocked(en)
	}
	reply := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(len(coll.indexes))},
		{Key: "createdCollectionAutomatically", Value: created},
	}
	if len(toAdd) == 0 {
		reply = append(reply, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return reply, nil
}

func cmdDropIndexes(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	which, ok := c.Arg("index")
	if !ok {
		return nil, errorf(codeFailedToParse, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.InTransaction() {
		return nil, errorf(263, "Cannot run 'dropIndexes' in a multi-document transaction.")
	}
	coll := e.collLocked(c.DB, name)
	if coll == nil && e.userViewLocked(c.DB, name) != nil {
		return nil, errIsView(c.DB, name)
	}
	if coll == nil {
		return nil, errorf(codeNamespaceNotFound, "ns not found %s.%s", c.DB, name)
	}
	was := int32(len(coll.indexes))
	var drop []*index
	find := func(n string) (*index, *cmdError) {
		ix := coll.indexByName(n)
		if ix == nil {
			return nil, errorf(codeIndexNotFound, "index not found with name [%s]", n)
		}
		if ix.isID {
			return nil, errorf(codeInvalidOptions, "cannot drop _id index")
		}
		return ix, nil
	}
	switch w := which.(type) {
	case string:
		if w == "*" {
			drop = slices.Clone(coll.indexes[1:])
			break
		}
		ix, err := find(w)
		if err != nil {
			return nil, err
		}
		drop = append(drop, ix)
	case bson.A:
		for _, x := range w {
			n, ok := x.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "dropIndexes 'index' array must contain only strings")
			}
			ix, err := find(n)
			if err != nil {
				return nil, err
			}
			drop = append(drop, ix)
		}
	case bson.D:
		var matches []*index
		for _, ix := range coll.indexes {
			if sameKey(ix.key, w) {
				matches = append(matches, ix)
			}
		}
		switch {
		case len(matches) == 0:
			return nil, errorf(codeIndexNotFound, "can't find index with key: %s", formatKeyValue(w))
		case len(matches) > 1:
			return nil, errorf(codeAmbiguousIndexKeyPattern, "%d indexes found for key: %s, identify by name instead. Conflicting indexes: %s, %s",
				len(matches), formatKeyValue(w), formatKeyValue(matches[0].spec), formatKeyValue(matches[1].spec))
		case matches[0].isID:
			return nil, errorf(codeInvalidOptions, "cannot drop _id index")
		}
		drop = matches
	default:
		return nil, errorf(codeTypeMismatch, "BSON field 'dropIndexes.index' is the wrong type '%s', expected types '[string, object, array]'", typeName(which))
	}
	for _, ix := range drop {
		coll.indexes = slices.DeleteFunc(coll.indexes, func(o *index) bool { return o == ix })
		e.logLocked(&oplogEntry{ts: e.clock.tick(), op: "dropIndexes", db: coll.db, coll: coll.name,
			collUUID: coll.uuid, opDesc: bson.D{{Key: "indexes", Value: bson.A{ix.spec}}}})
	}
	return bson.D{{Key: "nIndexesWas", Value: was}}, nil
}

const codeAmbiguousIndexKeyPattern = 181

func cmdListIndexes(s *Server, c *command) (bson.D, error) {
	name, err := collectionArg(c)
	if err != nil {
		return nil, err
	}
	e := s.eng
	e.mu.Lock()
	coll := e.viewLocked(c, c.DB, name)
	if coll == nil {
		e.mu.Unlock()
		return nil, errorf(codeNamespaceNotFound, "ns does not exist: %s.%s", c.DB, name)
	}
	docs := make([]any, len(coll.indexes))
	for i, ix := range coll.indexes {
		docs[i] = ix.spec
	}
	e.mu.Unlock()
	n, _ := batchSizeArg(c)
	return e.firstBatch(c, newStaticCursor(c.DB+"."+name, docs), int(n))
}

// ttlExpiry returns when a document expires under a TTL index: the earliest date in the
// indexed field plus expireAfterSeconds. ok is false when the field holds no date.
func (ix *index) ttlExpiry(doc bson.D) (time.Time, bool) {
	v, ok := query.GetPath(doc, ix.key[0].Key)
	if !ok {
		return time.Time{}, false
	}
	var earliest bson.DateTime
	found := false
	consider := func(x any) {
		if d, ok := x.(bson.DateTime); ok && (!found || d < earliest) {
			earliest, found = d, true
		}
	}
	if arr, ok := v.(bson.A); ok {
		for _, x := range arr {
			consider(x)
		}
	} else {
		consider(v)
	}
	if !found {
		return time.Time{}, false
	}
	return earliest.Time().Add(time.Duration(ix.ttlSeconds * float64(time.Second))), true
}
