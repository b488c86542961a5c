package mongosim

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ixWriteErr returns the single write error of err (a WriteException or BulkWriteException).
func ixWriteErr(t *testing.T, err error) (code int, msg string, raw bson.Raw) {
	t.Helper()
	var wex mongo.WriteException
	if errors.As(err, &wex) && len(wex.WriteErrors) == 1 {
		return wex.WriteErrors[0].Code, wex.WriteErrors[0].Message, wex.WriteErrors[0].Raw
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && len(bwe.WriteErrors) == 1 {
		return bwe.WriteErrors[0].Code, bwe.WriteErrors[0].Message, bwe.WriteErrors[0].Raw
	}
	t.Fatalf("want one write error, got %v", err)
	return 0, "", nil
}

func TestIndexCreateListDropShapes(t *testing.T) {
	srv, cl := startServer(t, Options{})
	db := cl.Database("ix")
	raw := wRun(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "name", Value: "email_1"}, {Key: "unique", Value: true}},
		bson.D{{Key: "key", Value: bson.D{{Key: "createdAt", Value: 1}}}, {Key: "expireAfterSeconds", Value: int32(3600)}, {Key: "name", Value: "createdAt_1"}},
		bson.D{{Key: "key", Value: bson.D{{Key: "s", Value: 1}, {Key: "t", Value: -1}}}, {Key: "name", Value: "s_1_t_-1"},
			{Key: "partialFilterExpression", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$exists", Value: true}}}}}},
	}}})
	if wInt32(t, raw, "numIndexesBefore") != 1 || wInt32(t, raw, "numIndexesAfter") != 4 ||
		!wWantType(t, raw, "createdCollectionAutomatically", bson.TypeBoolean).Boolean() {
		t.Fatalf("createIndexes reply = %s", raw)
	}
	// The same request again: nothing to do, with the note.
	raw = wRun(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "email", Value: 1}}}, {Key: "name", Value: "email_1"}, {Key: "unique", Value: true}}}}})
	if wInt32(t, raw, "numIndexesBefore") != 4 || wInt32(t, raw, "numIndexesAfter") != 4 ||
		raw.Lookup("note").StringValue() != "all indexes already exist" {
		t.Fatalf("repeated createIndexes reply = %s", raw)
	}
	// The driver's view.
	ctx := testCtx(t)
	iv := db.Collection("c").Indexes()
	names, err := iv.CreateMany(ctx, []mongo.IndexModel{{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}}})
	if err != nil || len(names) != 1 || names[0] != "a_1_b_-1" {
		t.Fatalf("CreateMany = %v, %v", names, err)
	}
	specs, err := iv.ListSpecifications(ctx)
	if err != nil || len(specs) != 5 {
		t.Fatalf("ListSpecifications = %v, %v", specs, err)
	}
	if specs[0].Name != "_id_" || specs[1].Name != "email_1" || specs[1].Unique == nil || !*specs[1].Unique ||
		specs[2].ExpireAfterSeconds == nil || *specs[2].ExpireAfterSeconds != 3600 {
		t.Fatalf("specs = %+v %+v %+v", specs[0], specs[1], specs[2])
	}
	cur, err := iv.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []bson.Raw
	if err := cur.All(ctx, &listed); err != nil {
		t.Fatal(err)
	}
	if got := listed[0].String(); got != `{"v": {"$numberInt":"2"},"key": {"_id": {"$numberInt":"1"}},"name": "_id_"}` {
		t.Fatalf("_id_ spec = %s", got)
	}
	if got := listed[3].Lookup("partialFilterExpression").String(); got != `{"s": {"$exists": true}}` {
		t.Fatalf("partial spec = %s", listed[3])
	}
	// Drops.
	if err := iv.DropOne(ctx, "a_1_b_-1"); err != nil {
		t.Fatal(err)
	}
	ce := wRunErr(t, db, bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "nope"}})
	if ce.Code != codeIndexNotFound || ce.Message != "index not found with name [nope]" {
		t.Fatalf("drop missing index = %+v", ce)
	}
	ce = wRunErr(t, db, bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "_id_"}})
	if ce.Code != codeInvalidOptions {
		t.Fatalf("drop _id_ = %+v", ce)
	}
	raw = wRun(t, db, bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: bson.D{{Key: "email", Value: 1}}}})
	if wInt32(t, raw, "nIndexesWas") != 4 {
		t.Fatalf("drop by key = %s", raw)
	}
	raw = wRun(t, db, bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "*"}})
	if wInt32(t, raw, "nIndexesWas") != 3 {
		t.Fatalf(`drop "*" = %s`, raw)
	}
	if specs, _ := iv.ListSpecifications(ctx); len(specs) != 1 || specs[0].Name != "_id_" {
		t.Fatalf(`after drop "*": %+v`, specs)
	}
	// Missing collection: listIndexes 26 (the driver makes it an empty list), dropIndexes 26.
	ce = wRunErr(t, db, bson.D{{Key: "listIndexes", Value: "missing"}})
	if ce.Code != codeNamespaceNotFound {
		t.Fatalf("listIndexes on a missing collection = %+v", ce)
	}
	if specs, err := db.Collection("missing").Indexes().ListSpecifications(ctx); err != nil || len(specs) != 0 {
		t.Fatalf("driver List on a missing collection = %v, %v", specs, err)
	}
	// Oplog: createIndexes and dropIndexes entries with the specs.
	var ops []string
	for _, en := range wOplog(srv) {
		if en.db == "ix" && en.coll == "c" {
			ops = append(ops, en.op)
		}
	}
	if got := strings.Join(ops, ","); got != "create,createIndexes,createIndexes,createIndexes,createIndexes,dropIndexes,dropIndexes,dropIndexes,dropIndexes" {
		t.Fatalf("catalog entries = %s", got)
	}
}

func TestIndexConflicts(t *testing.T) {
	_, cl := startServer(t, Options{})
	db := cl.Database("ix")
	wRun(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	ce := wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "other"}}}}})
	if ce.Code != codeIndexOptionsConflict {
		t.Fatalf("same key, other name = %+v, want 85", ce)
	}
	ce = wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "b", Value: 1}}}, {Key: "name", Value: "a_1"}}}}})
	if ce.Code != codeIndexKeySpecsConflict {
		t.Fatalf("same name, other key = %+v, want 86", ce)
	}
	ce = wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}}})
	if ce.Code != codeIndexOptionsConflict {
		t.Fatalf("same name and key, other options = %+v, want 85", ce)
	}
	ce = wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "id_again"}}}}})
	if ce.Code != codeIndexOptionsConflict {
		t.Fatalf("{_id: 1} under another name = %+v, want 85", ce)
	}
	raw := wRun(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}}}}})
	if raw.Lookup("note").StringValue() != "all indexes already exist" {
		t.Fatalf("_id_ again = %s", raw)
	}
	ce = wRunErr(t, db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "t", Value: "text"}}}, {Key: "name", Value: "t_text"}}}}})
	if ce.Code != codeUnsupported || !strings.Contains(ce.Message, "text") {
		t.Fatalf("text index = %+v, want an unsupported error naming it", ce)
	}
}

func TestIndexUniqueViolations(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("ix").Collection("users")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a"}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("insert dup email: %v", err)
	}
	code, msg, raw := ixWriteErr(t, err)
	if code != 11000 || msg != `E11000 duplicate key error collection: ix.users index: email_1 dup key: { email: "a" }` {
		t.Fatalf("write error %d %q", code, msg)
	}
	if kp, kv := raw.Lookup("keyPattern").String(), raw.Lookup("keyValue").String(); kp != `{"email": {"$numberInt":"1"}}` || kv != `{"email": "a"}` {
		t.Fatalf("keyPattern %s keyValue %s", kp, kv)
	}
	// An update into a duplicate, and an upsert into one.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "email", Value: "b"}}); err != nil {
		t.Fatal(err)
	}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "a"}}}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("update into dup: %v", err)
	}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: "b"}}}}, options.UpdateOne().SetUpsert(true))
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("upsert into dup: %v", err)
	}
	// The failed update left the document unchanged; a failed replace frees nothing either.
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "email", Value: "a"}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("replace into dup: %v", err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 5}, {Key: "email", Value: "b"}})
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("b must still be held by _id 3: %v", err)
	}
	// Missing fields key as null: only one document may lack the field.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 6}}); err != nil {
		t.Fatal(err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}})
	if code, msg, _ := ixWriteErr(t, err); code != 11000 || !strings.HasSuffix(msg, "dup key: { email: null }") {
		t.Fatalf("second missing email: %d %q", code, msg)
	}
	// Deleting frees the key.
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 8}, {Key: "email", Value: "a"}}); err != nil {
		t.Fatalf("key freed by delete: %v", err)
	}
	// Numbers are equal across types.
	nums := cl.Database("ix").Collection("nums")
	if _, err := nums.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := nums.InsertOne(ctx, bson.D{{Key: "n", Value: int32(1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := nums.InsertOne(ctx, bson.D{{Key: "n", Value: 1.0}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("1 and 1.0 must collide: %v", err)
	}
}

func TestIndexUniqueOverExistingDuplicates(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	coll := cl.Database("ix").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "k", Value: 1}}, bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 11000 || !mongo.IsDuplicateKeyError(err) || !strings.Contains(ce.Message, "dup key: { k: 1 }") {
		t.Fatalf("unique over duplicates = %v", err)
	}
	if specs, _ := coll.Indexes().ListSpecifications(ctx); len(specs) != 1 {
		t.Fatalf("the failed index was kept: %+v", specs)
	}
}

func TestIndexPartialSparseCompoundMultikey(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("ix")
	// Partial: uniqueness only among active documents.
	p := db.Collection("partial")
	if _, err := p.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}},
		Options: options.Index().SetUnique(true).SetPartialFilterExpression(bson.D{{Key: "active", Value: true}})}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []bson.D{
		{{Key: "name", Value: "x"}, {Key: "active", Value: true}},
		{{Key: "name", Value: "x"}, {Key: "active", Value: false}},
		{{Key: "name", Value: "x"}},
	} {
		if _, err := p.InsertOne(ctx, d); err != nil {
			t.Fatalf("partial insert %v: %v", d, err)
		}
	}
	if _, err := p.InsertOne(ctx, bson.D{{Key: "name", Value: "x"}, {Key: "active", Value: true}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("second active x: %v", err)
	}
	if _, err := p.UpdateOne(ctx, bson.D{{Key: "active", Value: false}}, bson.D{{Key: "$set", Value: bson.D{{Key: "active", Value: true}}}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("activating a second x: %v", err)
	}
	// Sparse: documents without the field are not indexed.
	s := db.Collection("sparse")
	if _, err := s.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "tag", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}, bson.D{{Key: "tag", Value: nil}}}); err != nil {
		t.Fatalf("sparse: %v", err)
	}
	if _, err := s.InsertOne(ctx, bson.D{{Key: "tag", Value: nil}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("sparse indexes explicit null: %v", err)
	}
	// Compound: the combination is unique; keyValue names every field.
	c := db.Collection("compound")
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b.c", Value: -1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: 1}}}},
		bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: 2}}}},
	}); err != nil {
		t.Fatal(err)
	}
	_, err := c.InsertOne(ctx, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: bson.D{{Key: "c", Value: 2}}}})
	code, msg, raw := ixWriteErr(t, err)
	if code != 11000 || !strings.HasSuffix(msg, "index: a_1_b.c_-1 dup key: { a: 1, b.c: 2 }") ||
		raw.Lookup("keyValue").String() != `{"a": {"$numberInt":"1"},"b.c": {"$numberInt":"2"}}` {
		t.Fatalf("compound dup: %d %q %s", code, msg, raw)
	}
	// Multikey: every array element is a key; repeats within one document are fine.
	m := db.Collection("multi")
	if _, err := m.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "tags", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.InsertOne(ctx, bson.D{{Key: "tags", Value: bson.A{"a", "b", "a"}}}); err != nil {
		t.Fatalf("repeated element in one doc: %v", err)
	}
	_, err = m.InsertOne(ctx, bson.D{{Key: "tags", Value: bson.A{"c", "b"}}})
	if code, msg, _ := ixWriteErr(t, err); code != 11000 || !strings.HasSuffix(msg, `dup key: { tags: "b" }`) {
		t.Fatalf("multikey dup: %d %q", code, msg)
	}
	if _, err := m.InsertOne(ctx, bson.D{{Key: "tags", Value: "c"}}); err != nil {
		t.Fatalf("scalar c after array [a b]: %v", err)
	}
	if _, err := m.InsertOne(ctx, bson.D{{Key: "tags", Value: bson.A{"c"}}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("[c] vs scalar c: %v", err)
	}
}

func TestIndexKeysForUnit(t *testing.T) {
	ix, err := parseIndexSpec(bson.D{{Key: "key", Value: bson.D{{Key: "a.b", Value: 1}}}, {Key: "unique", Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	if ix.name != "a.b_1" {
		t.Fatalf("default name = %q", ix.name)
	}
	keys, kerr := ix.keysFor(bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "b", Value: 1}}, bson.D{{Key: "b", Value: 2}}, bson.D{{Key: "c", Value: 3}}}}})
	if kerr != nil || len(keys) != 3 {
		t.Fatalf("keys through an array of documents = %v, %v (want 1, 2, null)", keys, kerr)
	}
	par, _ := parseIndexSpec(bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: 1}}}})
	if _, kerr := par.keysFor(bson.D{{Key: "x", Value: bson.A{1, 2}}, {Key: "y", Value: bson.A{1, 2}}}); kerr == nil || kerr.Code != 171 {
		t.Fatalf("parallel arrays = %v, want 171", kerr)
	}
	if got := formatKeyValue(bson.D{{Key: "_id", Value: bson.ObjectID{0x65}}, {Key: "d", Value: 1.5}, {Key: "e", Value: bson.D{{Key: "x", Value: "y"}}}}); got != `{ _id: ObjectId('650000000000000000000000'), d: 1.5, e: { x: "y" } }` {
		t.Fatalf("formatKeyValue = %s", got)
	}
}

func TestIndexCatalogCommands(t *testing.T) {
	srv, cl := startServer(t, Options{})
	ctx := testCtx(t)
	db := cl.Database("cat")
	admin := cl.Database("admin")
	// create: options, NamespaceExists, unsupported options.
	if err := db.CreateCollection(ctx, "pre", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	if ce := wRunErr(t, db, bson.D{{Key: "create", Value: "pre"}}); ce.Code != codeNamespaceExists {
		t.Fatalf("create twice = %+v", ce)
	}
	for _, opt := range []bson.E{{Key: "expireAfterSeconds", Value: 10}, {Key: "clusteredIndex", Value: true}} {
		ce := wRunErr(t, db, bson.D{{Key: "create", Value: "x"}, opt})
		if ce.Code != codeUnsupported || !strings.Contains(ce.Message, opt.Key) {
			t.Fatalf("create with %s = %+v, want unsupported naming it", opt.Key, ce)
		}
	}
	if _, err := db.Collection("plain").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// listCollections: full documents, filter, nameOnly.
	cur, err := db.ListCollections(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var colls []bson.Raw
	if err := cur.All(ctx, &colls); err != nil {
		t.Fatal(err)
	}
	if len(colls) != 2 || colls[0].Lookup("name").StringValue() != "plain" || colls[1].Lookup("name").StringValue() != "pre" {
		t.Fatalf("listCollections = %v", colls)
	}
	if got := colls[1].Lookup("options").String(); got != `{"changeStreamPreAndPostImages": {"enabled": true}}` {
		t.Fatalf("options = %s", got)
	}
	uuid := colls[0].Lookup("info", "uuid")
	if st, data := uuid.Binary(); st != 4 || len(data) != 16 {
		t.Fatalf("info.uuid = %s", uuid)
	}
	names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: "pre"}})
	if err != nil || len(names) != 1 || names[0] != "pre" {
		t.Fatalf("ListCollectionNames(filter) = %v, %v", names, err)
	}
	raw := wRun(t, db, bson.D{{Key: "listCollections", Value: 1}, {Key: "nameOnly", Value: true}})
	if raw.Lookup("cursor", "ns").StringValue() != "cat.$cmd.listCollections" {
		t.Fatalf("listCollections ns = %s", raw)
	}
	first, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
	if len(first) != 2 || first[0].Document().String() != `{"name": "plain","type": "collection"}` {
		t.Fatalf("nameOnly batch = %v", first)
	}
	// collMod turns pre-images off.
	wRun(t, db, bson.D{{Key: "collMod", Value: "pre"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: false}}}})
	srv.eng.mu.Lock()
	off := !srv.eng.collLocked("cat", "pre").preAndPostImages
	srv.eng.mu.Unlock()
	if !off {
		t.Fatal("collMod did not disable pre-images")
	}
	if ce := wRunErr(t, db, bson.D{{Key: "collMod", Value: "pre"}, {Key: "timeseries", Value: bson.D{}}}); ce.Code != codeUnsupported {
		t.Fatalf("collMod timeseries = %+v", ce)
	}
	// listDatabases.
	// admin, config and local exist from the start, as on a real replica-set member.
	res, err := cl.ListDatabases(ctx, bson.D{})
	if err != nil || len(res.Databases) != 4 || res.Databases[1].Name != "cat" || res.Databases[1].SizeOnDisk <= 0 || res.Databases[1].Empty ||
		res.Databases[0].Name != "admin" || res.Databases[2].Name != "config" || res.Databases[3].Name != "local" {
		t.Fatalf("ListDatabases = %+v, %v", res, err)
	}
	raw = wRun(t, admin, bson.D{{Key: "listDatabases", Value: 1}})
	dbs, _ := raw.Lookup("databases").Array().Values()
	wWantType(t, dbs[0].Document(), "sizeOnDisk", bson.TypeInt64)
	wWantType(t, dbs[0].Document(), "empty", bson.TypeBoolean)
	dbNames, err := cl.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: "nope"}})
	if err != nil || len(dbNames) != 0 {
		t.Fatalf("ListDatabaseNames(filter) = %v, %v", dbNames, err)
	}
	// renameCollection keeps documents and UUID.
	wRun(t, admin, bson.D{{Key: "renameCollection", Value: "cat.plain"}, {Key: "to", Value: "cat.renamed"}})
	if docs := wDocs(srv, "cat", "renamed"); len(docs) != 1 {
		t.Fatalf("renamed documents = %v", docs)
	}
	srv.eng.mu.Lock()
	sameUUID := string(srv.eng.collLocked("cat", "renamed").uuid.Data) == string(mustBinary(uuid))
	gone := srv.eng.collLocked("cat", "plain") == nil
	srv.eng.mu.Unlock()
	if !sameUUID || !gone {
		t.Fatalf("rename: same uuid %v, source gone %v", sameUUID, gone)
	}
	if ce := wRunErr(t, admin, bson.D{{Key: "renameCollection", Value: "cat.nope"}, {Key: "to", Value: "cat.x"}}); ce.Code != codeNamespaceNotFound {
		t.Fatalf("rename missing = %+v", ce)
	}
	if ce := wRunErr(t, admin, bson.D{{Key: "renameCollection", Value: "cat.renamed"}, {Key: "to", Value: "cat.pre"}}); ce.Code != codeNamespaceExists {
		t.Fatalf("rename onto existing = %+v", ce)
	}
	wRun(t, admin, bson.D{{Key: "renameCollection", Value: "cat.renamed"}, {Key: "to", Value: "cat.pre"}, {Key: "dropTarget", Value: true}})
	// drop: reply shape, 26 when missing (the driver ignores it).
	raw = wRun(t, db, bson.D{{Key: "drop", Value: "pre"}})
	if wInt32(t, raw, "nIndexesWas") != 1 || raw.Lookup("ns").StringValue() != "cat.pre" {
		t.Fatalf("drop reply = %s", raw)
	}
	if ce := wRunErr(t, db, bson.D{{Key: "drop", Value: "pre"}}); ce.Code != codeNamespaceNotFound {
		t.Fatalf("drop missing = %+v", ce)
	}
	if err := db.Collection("pre").Drop(ctx); err != nil {
		t.Fatalf("driver Drop of a missing collection: %v", err)
	}
	// dropDatabase: one drop per collection, then dropDatabase.
	for _, n := range []string{"b", "a"} {
		if _, err := db.Collection(n).InsertOne(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	ens := wOplog(srv)
	var tail []string
	for _, en := range ens[len(ens)-3:] {
		tail = append(tail, en.op+":"+en.coll)
	}
	if got := strings.Join(tail, ","); got != "drop:a,drop:b,dropDatabase:" {
		t.Fatalf("dropDatabase entries = %s", got)
	}
	if names, _ := cl.ListDatabaseNames(ctx, bson.D{}); strings.Join(names, ",") != "admin,config,local" {
		t.Fatalf("databases after drop = %v", names)
	}
	var ops []string
	for _, en := range ens {
		if en.op == "rename" {
			ops = append(ops, en.coll+">"+en.toColl)
		}
		if en.op == "drop" && en.coll == "pre" {
			ops = append(ops, "drop "+en.coll)
		}
	}
	if got := strings.Join(ops, ","); got != "plain>renamed,drop pre,renamed>pre,drop pre" {
		t.Fatalf("rename/drop entries = %s", got)
	}
}

func mustBinary(v bson.RawValue) []byte {
	_, data := v.Binary()
	return data
}
