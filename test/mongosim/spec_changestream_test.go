package mongosim

// Ports of cases from the MongoDB specifications' unified change-stream tests
// (source/change-streams/tests/unified/: change-streams, change-streams-errors,
// change-streams-resume-errorLabels, change-streams-pre_and_post_images). Each Go test is named
// after the spec case it ports. The spec's "client0" is the watching client; "globalClient" is a
// second client that does the writes and sets fail points. Command expectations are checked
// on the server's command log.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// Matching in the style of the unified test format: the root document may have extra fields,
// nested documents must match exactly, and these markers stand for the format's operators.
type (
	specExists  struct{} // {$$exists: true}
	specAbsent  struct{} // {$$exists: false}
	specAnyType string   // {$$type: "object"} and friends
)

func specMatch(path string, want, got any, root bool) error {
	switch w := want.(type) {
	case specExists:
		return nil
	case specAnyType:
		if typeName(got) != string(w) {
			return fmt.Errorf("%s: type %s, want %s", path, typeName(got), string(w))
		}
		return nil
	case bson.D:
		g, ok := got.(bson.D)
		if !ok {
			return fmt.Errorf("%s: %s, want a document", path, csJSON(got))
		}
		for _, e := range w {
			v, present := lookupD(g, e.Key)
			if _, absent := e.Value.(specAbsent); absent {
				if present {
					return fmt.Errorf("%s.%s: present (%s), want absent", path, e.Key, csJSON(v))
				}
				continue
			}
			if !present {
				return fmt.Errorf("%s.%s: missing", path, e.Key)
			}
			if err := specMatch(path+"."+e.Key, e.Value, v, false); err != nil {
				return err
			}
		}
		if !root {
			for _, e := range g {
				if _, ok := lookupD(w, e.Key); !ok {
					return fmt.Errorf("%s: unexpected field %s", path, e.Key)
				}
			}
		}
		return nil
	case bson.A:
		g, ok := got.(bson.A)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: %s, want %s", path, csJSON(got), csJSON(want))
		}
		for i := range w {
			if err := specMatch(fmt.Sprintf("%s.%d", path, i), w[i], g[i], false); err != nil {
				return err
			}
		}
		return nil
	default:
		if want == nil {
			if got != nil {
				return fmt.Errorf("%s: %s, want null", path, csJSON(got))
			}
			return nil
		}
		if !query.Equal(want, got) || query.TypeOrder(want) != query.TypeOrder(got) {
			return fmt.Errorf("%s: %s, want %s", path, csJSON(got), csJSON(want))
		}
		return nil
	}
}

// specEnv is the entities of a spec test: database0.collection0 watched through client0,
// written through globalClient.
type specEnv struct {
	t      *testing.T
	srv    *Server
	client *mongo.Client // client0
	global *mongo.Client // globalClient
	ctx    context.Context
}

func newSpecEnv(t *testing.T) *specEnv {
	t.Helper()
	srv, _ := startServer(t, Options{})
	return &specEnv{t: t, srv: srv, client: csFastRecoveryClient(t, srv), global: connectClient(t, srv, nil), ctx: testCtx(t)}
}

func (s *specEnv) coll0() *mongo.Collection {
	return s.client.Database("database0").Collection("collection0")
}

func (s *specEnv) globalColl(db, coll string) *mongo.Collection {
	return s.global.Database(db).Collection(coll)
}

func (s *specEnv) insert(c *mongo.Collection, doc bson.D) {
	s.t.Helper()
	if _, err := c.InsertOne(s.ctx, doc); err != nil {
		s.t.Fatalf("insertOne: %v", err)
	}
}

// failPoint configures a fail point through globalClient and turns it off at cleanup.
func (s *specEnv) failPoint(fp bson.D) {
	s.t.Helper()
	if err := s.global.Database("admin").RunCommand(s.ctx, fp).Err(); err != nil {
		s.t.Fatalf("configureFailPoint: %v", err)
	}
	name := fp[0].Value
	s.t.Cleanup(func() {
		_ = s.srv.ConfigureFailPoint(bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}})
	})
}

// iterate is the spec's iterateUntilDocumentOrError: the next event, or the error.
func (s *specEnv) iterate(cs *mongo.ChangeStream) (bson.D, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if cs.Next(ctx) {
		return csEvent(s.t, cs), nil
	}
	if cs.Err() == nil {
		return nil, fmt.Errorf("stream ended without an event")
	}
	return nil, cs.Err()
}

func (s *specEnv) expectEvent(cs *mongo.ChangeStream, want bson.D) {
	s.t.Helper()
	ev, err := s.iterate(cs)
	if err != nil {
		s.t.Fatalf("iterate: %v", err)
	}
	if err := specMatch("event", want, ev, true); err != nil {
		s.t.Fatalf("%v\nevent: %s", err, csJSON(ev))
	}
}

func (s *specEnv) expectError(cs *mongo.ChangeStream, code int32, labels ...string) {
	s.t.Helper()
	ev, err := s.iterate(cs)
	if err == nil {
		s.t.Fatalf("got event %s, want error %d", csJSON(ev), code)
	}
	var se mongo.ServerError
	if ok := errors.As(err, &se); !ok || !se.HasErrorCode(int(code)) {
		s.t.Fatalf("error %v, want code %d", err, code)
	}
	for _, l := range labels {
		if !se.HasErrorLabel(l) {
			s.t.Fatalf("error %v lacks label %s", err, l)
		}
	}
}

func (s *specEnv) watch(pipeline mongo.Pipeline, opts ...options.Lister[options.ChangeStreamOptions]) *mongo.ChangeStream {
	s.t.Helper()
	if pipeline == nil {
		pipeline = mongo.Pipeline{}
	}
	cs, err := s.coll0().Watch(s.ctx, pipeline, opts...)
	if err != nil {
		s.t.Fatalf("createChangeStream: %v", err)
	}
	s.t.Cleanup(func() { _ = cs.Close(context.Background()) })
	return cs
}

// expectCommand checks the i-th logged command named name against want (a root match).
func (s *specEnv) expectCommand(name string, i int, db string, want bson.D) {
	s.t.Helper()
	cmds := s.srv.CommandsNamed(name)
	if i >= len(cmds) {
		s.t.Fatalf("%d %s commands logged, want at least %d", len(cmds), name, i+1)
	}
	if cmds[i].DB != db {
		s.t.Fatalf("%s #%d ran on %q, want %q", name, i, cmds[i].DB, db)
	}
	if err := specMatch(name, want, cmds[i].Body, true); err != nil {
		s.t.Fatalf("%v\ncommand: %s", err, csJSON(cmds[i].Body))
	}
}

var (
	ns00 = bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "collection0"}}
)

func specPipeline(stages ...bson.D) mongo.Pipeline { return mongo.Pipeline(stages) }

// --- change-streams.json ---------------------------------------------------------------------

func TestChangeStreamSpecTestArrayTruncation(t *testing.T) {
	s := newSpecEnv(t)
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1},
		{Key: "array", Value: bson.A{"foo", bson.D{{Key: "a", Value: "bar"}}, 1, 2, 3}}})
	cs := s.watch(nil)
	if _, err := s.coll0().UpdateOne(s.ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{
		{{Key: "$set", Value: bson.D{{Key: "array", Value: bson.A{"foo", bson.D{{Key: "a", Value: "bar"}}}}}}}}); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "update"}, {Key: "ns", Value: ns00},
		{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{}}, {Key: "removedFields", Value: bson.A{}},
			{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "array"}, {Key: "newSize", Value: 2}}}}}}})
}

func TestChangeStreamSpecTestWithDocumentComment(t *testing.T) {
	s := newSpecEnv(t)
	comment := bson.D{{Key: "name", Value: "test1"}}
	s.watch(nil, options.ChangeStream().SetComment(comment))
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "comment", Value: comment}})
}

func TestChangeStreamSpecTestWithStringComment(t *testing.T) {
	s := newSpecEnv(t)
	s.watch(nil, options.ChangeStream().SetComment("comment"))
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "comment", Value: "comment"}})
}

func TestChangeStreamSpecTestThatCommentIsSetOnGetMore(t *testing.T) {
	s := newSpecEnv(t)
	comment := bson.D{{Key: "key", Value: "value"}}
	cs := s.watch(nil, options.ChangeStream().SetComment(comment))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	if _, err := s.iterate(cs); err != nil {
		t.Fatal(err)
	}
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "comment", Value: comment}})
	s.expectCommand("getMore", 0, "database0", bson.D{{Key: "getMore", Value: specExists{}},
		{Key: "collection", Value: "collection0"}, {Key: "comment", Value: comment}})
}

func TestChangeStreamSpecToFieldIsSetInARenameChangeEvent(t *testing.T) {
	s := newSpecEnv(t)
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}})
	cs := s.watch(nil)
	_ = s.client.Database("database0").Collection("collection1").Drop(s.ctx)
	if err := s.client.Database("admin").RunCommand(s.ctx, bson.D{{Key: "renameCollection", Value: "database0.collection0"},
		{Key: "to", Value: "database0.collection1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "rename"}, {Key: "ns", Value: ns00},
		{Key: "to", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "collection1"}}}})
}

func TestChangeStreamSpecTestUnknownOperationTypeMUSTNOTErr(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "operationType", Value: "addedInFutureMongoDBVersion"}, {Key: "ns", Value: 1}}}}))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "addedInFutureMongoDBVersion"}, {Key: "ns", Value: ns00}})
}

func TestChangeStreamSpecTestNewFieldAddedInResponseMUSTNOTErr(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "operationType", Value: 1}, {Key: "ns", Value: 1}, {Key: "newField", Value: "newFieldValue"}}}}))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00}, {Key: "newField", Value: "newFieldValue"}})
}

func TestChangeStreamSpecTestNewStructureInNsDocumentMUSTNOTErr(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns.viewOn", Value: "db.coll"}}}}))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: bson.D{{Key: "viewOn", Value: "db.coll"}}}})
}

func TestChangeStreamSpecTestModifiedStructureInNsDocumentMUSTNOTErr(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "$ns.db"}, {Key: "coll", Value: "$ns.coll"}, {Key: "viewOn", Value: "db.coll"}}}}}}))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "collection0"}, {Key: "viewOn", Value: "db.coll"}}}})
}

func TestChangeStreamSpecTestServerErrorOnProjectingOutID(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	s.expectError(cs, codeChangeStreamFatalError, "NonResumableChangeStreamError")
}

func TestChangeStreamSpecTestProjectionInChangeStreamReturnsExpectedFields(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "optype", Value: "$operationType"}, {Key: "ns", Value: 1}, {Key: "newField", Value: "value"}}}}))
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "optype", Value: "insert"}, {Key: "ns", Value: ns00}, {Key: "newField", Value: "value"}})
}

func TestChangeStreamSpecChangeStreamMustBeTheFirstStageSentToTheServer(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "_id", Value: specExists{}}, {Key: "documentKey", Value: specExists{}},
		{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}})
}

func TestChangeStreamSpecChangeStreamShouldAllowValidAggregatePipelineStages(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "fullDocument.z", Value: 3}}}}))
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "y", Value: 2}})
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "z", Value: 3}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "z", Value: 3}, {Key: "_id", Value: specExists{}}}}})
}

func TestChangeStreamSpecWatchHelperOnACollection(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection1"), bson.D{{Key: "x", Value: 1}})
	s.insert(s.globalColl("database1", "collection0"), bson.D{{Key: "y", Value: 2}})
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "z", Value: 3}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "z", Value: 3}, {Key: "_id", Value: specExists{}}}}})
}

func TestChangeStreamSpecWatchHelperOnADatabase(t *testing.T) {
	s := newSpecEnv(t)
	cs, err := s.client.Database("database0").Watch(s.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	s.insert(s.globalColl("database0", "collection1"), bson.D{{Key: "x", Value: 1}})
	s.insert(s.globalColl("database1", "collection0"), bson.D{{Key: "y", Value: 2}})
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "z", Value: 3}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "collection1"}}},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "z", Value: 3}, {Key: "_id", Value: specExists{}}}}})
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: int32(1)}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}})
}

func TestChangeStreamSpecWatchHelperOnAMongoClient(t *testing.T) {
	s := newSpecEnv(t)
	cs, err := s.client.Watch(s.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	s.insert(s.globalColl("database0", "collection1"), bson.D{{Key: "x", Value: 1}})
	s.insert(s.globalColl("database1", "collection0"), bson.D{{Key: "y", Value: 2}})
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "z", Value: 3}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "collection1"}}},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "database1"}, {Key: "coll", Value: "collection0"}}},
		{Key: "fullDocument", Value: bson.D{{Key: "y", Value: 2}, {Key: "_id", Value: specExists{}}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "z", Value: 3}, {Key: "_id", Value: specExists{}}}}})
	s.expectCommand("aggregate", 0, "admin", bson.D{{Key: "aggregate", Value: int32(1)}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "allChangesForCluster", Value: true}}}}}}})
}

func TestChangeStreamSpecTestInsertUpdateReplaceAndDeleteEventTypes(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(nil)
	g := s.globalColl("database0", "collection0")
	s.insert(g, bson.D{{Key: "x", Value: 1}})
	if _, err := g.UpdateOne(s.ctx, bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ReplaceOne(s.ctx, bson.D{{Key: "x", Value: 2}}, bson.D{{Key: "x", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DeleteOne(s.ctx, bson.D{{Key: "x", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "update"}, {Key: "ns", Value: ns00},
		{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{{Key: "x", Value: 2}}},
			{Key: "removedFields", Value: bson.A{}}, {Key: "truncatedArrays", Value: specExists{}}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "replace"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 3}, {Key: "_id", Value: specExists{}}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "delete"}, {Key: "ns", Value: ns00}})
}

func TestChangeStreamSpecTestRenameAndInvalidateEventTypes(t *testing.T) {
	s := newSpecEnv(t)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "_id", Value: 1}})
	cs := s.watch(nil)
	_ = s.client.Database("database0").Collection("collection1").Drop(s.ctx)
	if err := s.global.Database("admin").RunCommand(s.ctx, bson.D{{Key: "renameCollection", Value: "database0.collection0"},
		{Key: "to", Value: "database0.collection1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "rename"}, {Key: "ns", Value: ns00},
		{Key: "to", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "collection1"}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "invalidate"}})
}

func TestChangeStreamSpecTestDropAndInvalidateEventTypes(t *testing.T) {
	s := newSpecEnv(t)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "_id", Value: 1}})
	cs := s.watch(nil)
	if err := s.client.Database("database0").Collection("collection0").Drop(s.ctx); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "drop"}, {Key: "ns", Value: ns00}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "invalidate"}})
}

func TestChangeStreamSpecTestConsecutiveResume(t *testing.T) {
	s := newSpecEnv(t)
	s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "closeConnection", Value: true}}}})
	cs := s.watch(nil, options.ChangeStream().SetBatchSize(1))
	g := s.globalColl("database0", "collection0")
	for i := 1; i <= 3; i++ {
		s.insert(g, bson.D{{Key: "x", Value: i}})
	}
	for i := 1; i <= 3; i++ {
		s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
			{Key: "fullDocument", Value: bson.D{{Key: "x", Value: i}, {Key: "_id", Value: specExists{}}}}})
	}
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"},
		{Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 1}}}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}})
	if n := len(s.srv.CommandsNamed("aggregate")); n != 3 {
		t.Fatalf("%d aggregates, want the original and two resumes", n)
	}
}

// --- change-streams-errors.json ----------------------------------------------------------------

func TestChangeStreamSpecChangeStreamShouldErrorWhenAnInvalidAggregationStageIsPassedIn(t *testing.T) {
	s := newSpecEnv(t)
	_, err := s.coll0().Watch(s.ctx, specPipeline(bson.D{{Key: "$unsupported", Value: "foo"}}))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(40324) {
		t.Fatalf("error %v, want 40324", err)
	}
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}, bson.D{{Key: "$unsupported", Value: "foo"}}}}})
}

func TestChangeStreamSpecChangeStreamShouldErrorWhenIDIsProjectedOut(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(specPipeline(bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}))
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "z", Value: 3}})
	s.expectError(cs, codeChangeStreamFatalError)
}

func TestChangeStreamSpecChangeStreamErrorsOnElectionInProgress(t *testing.T) {
	s := newSpecEnv(t)
	s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 216}, {Key: "closeConnection", Value: false}}}})
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "z", Value: 3}})
	s.expectError(cs, 216)
}

// --- change-streams-resume-errorLabels.json ----------------------------------------------------

func TestChangeStreamSpecChangeStreamResumesAfterErrorCode(t *testing.T) {
	// "change stream resumes after <codeName>" for every code the server labels resumable
	// (StaleShardVersion is skipped by the spec on 7.0/8.0).
	for _, tc := range []struct {
		code int32
		name string
	}{
		{6, "HostUnreachable"}, {7, "HostNotFound"}, {89, "NetworkTimeout"}, {91, "ShutdownInProgress"},
		{189, "PrimarySteppedDown"}, {262, "ExceededTimeLimit"}, {9001, "SocketException"},
		{10107, "NotWritablePrimary"}, {13435, "NotPrimaryNoSecondaryOk"}, {11602, "InterruptedDueToReplStateChange"},
		{11600, "InterruptedAtShutdown"}, {13436, "NotPrimaryOrSecondary"}, {150, "StaleEpoch"},
		{13388, "StaleConfig"}, {234, "RetryChangeStream"}, {133, "FailedToSatisfyReadPreference"},
	} {
		t.Run("change stream resumes after "+tc.name, func(t *testing.T) {
			s := newSpecEnv(t)
			s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
				{Key: "data", Value: bson.D{{Key: "errorCode", Value: tc.code}, {Key: "closeConnection", Value: false}}}})
			cs := s.watch(nil)
			s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
			s.expectEvent(cs, bson.D{{Key: "_id", Value: specExists{}}, {Key: "documentKey", Value: specExists{}},
				{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
				{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
			s.expectResumed()
		})
	}
}

// expectResumed checks the spec's command expectations for a resume: aggregate, a getMore on
// the collection, then an aggregate with resumeAfter.
func (s *specEnv) expectResumed() {
	s.t.Helper()
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}})
	s.expectCommand("getMore", 0, "database0", bson.D{{Key: "getMore", Value: specExists{}}, {Key: "collection", Value: "collection0"}})
	s.expectCommand("aggregate", 1, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "resumeAfter", Value: specExists{}}}}}}}})
	var order []string
	for _, r := range s.srv.Commands() {
		if r.Name == "aggregate" || r.Name == "getMore" {
			order = append(order, r.Name)
		}
	}
	if len(order) < 3 || strings.Join(order[:3], ",") != "aggregate,getMore,aggregate" {
		s.t.Fatalf("command order %v, want aggregate, getMore, aggregate", order)
	}
}

func TestChangeStreamSpecChangeStreamResumesIfErrorContainsResumableChangeStreamError(t *testing.T) {
	s := newSpecEnv(t)
	s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 50},
			{Key: "closeConnection", Value: false}, {Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}}}}})
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "_id", Value: specExists{}}, {Key: "documentKey", Value: specExists{}},
		{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectResumed()
}

func TestChangeStreamSpecChangeStreamDoesNotResumeIfErrorDoesNotContainResumableChangeStreamError(t *testing.T) {
	s := newSpecEnv(t)
	s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 6}, {Key: "closeConnection", Value: false}}}})
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
	s.expectError(cs, 6)
	if n := len(s.srv.CommandsNamed("aggregate")); n != 1 {
		t.Fatalf("%d aggregates: the driver resumed", n)
	}
}

// --- change-streams-pre_and_post_images.json ---------------------------------------------------

// prePostImagesCase runs one case of the pre/post-image file: collection
// "change-stream-tests.test" holding {_id: 1}, collMod changeStreamPreAndPostImages to enabled,
// a stream with the given option, then updateOne {_id: 1} {$set: {x: 1}}.
func prePostImagesCase(t *testing.T, enabled bool, opt *options.ChangeStreamOptionsBuilder, want bson.D, wantErr bool) {
	s := newSpecEnv(t)
	db := s.client.Database("change-stream-tests")
	coll := db.Collection("test")
	s.insert(s.global.Database("change-stream-tests").Collection("test"), bson.D{{Key: "_id", Value: 1}})
	if err := db.RunCommand(s.ctx, bson.D{{Key: "collMod", Value: "test"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: enabled}}}}).Err(); err != nil {
		t.Fatalf("collMod: %v", err)
	}
	cs, err := coll.Watch(s.ctx, mongo.Pipeline{}, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if _, err := coll.UpdateOne(s.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	ev, err := s.iterate(cs)
	if wantErr {
		var se mongo.ServerError
		if err == nil || !errors.As(err, &se) {
			t.Fatalf("got %v / %v, want a server error", csJSON(ev), err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	base := bson.D{{Key: "operationType", Value: "update"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "change-stream-tests"}, {Key: "coll", Value: "test"}}},
		{Key: "updateDescription", Value: specAnyType("object")}}
	if err := specMatch("event", append(base, want...), ev, true); err != nil {
		t.Fatalf("%v\nevent: %s", err, csJSON(ev))
	}
	// The aggregate carried the option as given.
	aggs := s.srv.CommandsNamed("aggregate")
	if len(aggs) == 0 || len(csStageOf(aggs[0])) != 1 {
		t.Fatalf("aggregate $changeStream %v", csStageOf(aggs[0]))
	}
}

func TestChangeStreamSpecFullDocumentWhenAvailableWithChangeStreamPreAndPostImagesEnabled(t *testing.T) {
	prePostImagesCase(t, true, options.ChangeStream().SetFullDocument(options.WhenAvailable),
		bson.D{{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}}}, false)
}

func TestChangeStreamSpecFullDocumentWhenAvailableWithChangeStreamPreAndPostImagesDisabled(t *testing.T) {
	prePostImagesCase(t, false, options.ChangeStream().SetFullDocument(options.WhenAvailable),
		bson.D{{Key: "fullDocument", Value: nil}}, false)
}

func TestChangeStreamSpecFullDocumentRequiredWithChangeStreamPreAndPostImagesEnabled(t *testing.T) {
	prePostImagesCase(t, true, options.ChangeStream().SetFullDocument(options.Required),
		bson.D{{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}}}, false)
}

func TestChangeStreamSpecFullDocumentRequiredWithChangeStreamPreAndPostImagesDisabled(t *testing.T) {
	prePostImagesCase(t, false, options.ChangeStream().SetFullDocument(options.Required), nil, true)
}

func TestChangeStreamSpecFullDocumentBeforeChangeWhenAvailableWithChangeStreamPreAndPostImagesEnabled(t *testing.T) {
	prePostImagesCase(t, true, options.ChangeStream().SetFullDocumentBeforeChange(options.WhenAvailable),
		bson.D{{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: 1}}}}, false)
}

func TestChangeStreamSpecFullDocumentBeforeChangeWhenAvailableWithChangeStreamPreAndPostImagesDisabled(t *testing.T) {
	prePostImagesCase(t, false, options.ChangeStream().SetFullDocumentBeforeChange(options.WhenAvailable),
		bson.D{{Key: "fullDocumentBeforeChange", Value: nil}}, false)
}

func TestChangeStreamSpecFullDocumentBeforeChangeRequiredWithChangeStreamPreAndPostImagesEnabled(t *testing.T) {
	prePostImagesCase(t, true, options.ChangeStream().SetFullDocumentBeforeChange(options.Required),
		bson.D{{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "_id", Value: 1}}}}, false)
}

func TestChangeStreamSpecFullDocumentBeforeChangeRequiredWithChangeStreamPreAndPostImagesDisabled(t *testing.T) {
	prePostImagesCase(t, false, options.ChangeStream().SetFullDocumentBeforeChange(options.Required), nil, true)
}

func TestChangeStreamSpecFullDocumentBeforeChangeOffWithChangeStreamPreAndPostImagesEnabled(t *testing.T) {
	prePostImagesCase(t, true, options.ChangeStream().SetFullDocumentBeforeChange(options.Off),
		bson.D{{Key: "fullDocumentBeforeChange", Value: specAbsent{}}}, false)
}

func TestChangeStreamSpecFullDocumentBeforeChangeOffWithChangeStreamPreAndPostImagesDisabled(t *testing.T) {
	prePostImagesCase(t, false, options.ChangeStream().SetFullDocumentBeforeChange(options.Off),
		bson.D{{Key: "fullDocumentBeforeChange", Value: specAbsent{}}}, false)
}

// --- change-streams-disambiguatedPaths.json ----------------------------------------------------

// disambiguatedPathsCase inserts doc into database0.collection0, opens a stream (with
// showExpandedEvents when expanded), runs updateOne {_id: 1} {$set: set} and matches the
// event's updateDescription.disambiguatedPaths against want (specAbsent: not present).
func disambiguatedPathsCase(t *testing.T, doc bson.D, expanded bool, set bson.D, want any) {
	s := newSpecEnv(t)
	s.insert(s.coll0(), doc)
	opts := options.ChangeStream()
	if expanded {
		opts.SetShowExpandedEvents(true)
	}
	cs := s.watch(nil, opts)
	if _, err := s.coll0().UpdateOne(s.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: set}}); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "update"}, {Key: "ns", Value: ns00},
		{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: specExists{}}, {Key: "removedFields", Value: specExists{}},
			{Key: "truncatedArrays", Value: specExists{}}, {Key: "disambiguatedPaths", Value: want}}}})
}

func TestChangeStreamSpecDisambiguatedPathsIsNotPresentWhenShowExpandedEventsIsFalseOrUnset(t *testing.T) {
	disambiguatedPathsCase(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.D{{Key: "1", Value: 1}}}}, false,
		bson.D{{Key: "a.1", Value: 2}}, specAbsent{})
}

func TestChangeStreamSpecDisambiguatedPathsIsPresentOnUpdateDescriptionWhenAnAmbiguousPathIsPresent(t *testing.T) {
	disambiguatedPathsCase(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.D{{Key: "1", Value: 1}}}}, true,
		bson.D{{Key: "a.1", Value: 2}}, bson.D{{Key: "a.1", Value: bson.A{"a", "1"}}})
}

func TestChangeStreamSpecDisambiguatedPathsReturnsArrayIndicesAsIntegers(t *testing.T) {
	disambiguatedPathsCase(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{bson.D{{Key: "1", Value: 1}}}}}, true,
		bson.D{{Key: "a.0.1", Value: 2}}, bson.D{{Key: "a.0.1", Value: bson.A{"a", specAnyType("int"), "1"}}})
}

// --- change-streams-showExpandedEvents.json ----------------------------------------------------

func TestChangeStreamSpecWhenProvidedShowExpandedEventsIsSentAsAPartOfTheAggregateCommand(t *testing.T) {
	s := newSpecEnv(t)
	s.watch(nil, options.ChangeStream().SetShowExpandedEvents(true))
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "showExpandedEvents", Value: true}}}}}}})
}

func TestChangeStreamSpecWhenOmittedShowExpandedEventsIsNotSentAsAPartOfTheAggregateCommand(t *testing.T) {
	s := newSpecEnv(t)
	s.watch(nil)
	s.expectCommand("aggregate", 0, "database0", bson.D{{Key: "aggregate", Value: "collection0"}, {Key: "cursor", Value: bson.D{}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "showExpandedEvents", Value: specAbsent{}}}}}}}})
}

func TestChangeStreamSpecWhenShowExpandedEventsIsTrueNewFieldsOnChangeStreamEventsAreHandledAppropriately(t *testing.T) {
	s := newSpecEnv(t)
	db := s.client.Database("database0")
	_ = db.Collection("foo").Drop(s.ctx)
	if err := db.CreateCollection(s.ctx, "foo"); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCollection(s.ctx, "collection0"); err != nil { // the file's initialData
		t.Fatal(err)
	}
	cs := s.watch(nil, options.ChangeStream().SetShowExpandedEvents(true))
	s.insert(s.coll0(), bson.D{{Key: "a", Value: 1}})
	if _, err := s.coll0().Indexes().CreateOne(s.ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetName("x_1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.client.Database("admin").RunCommand(s.ctx, bson.D{{Key: "renameCollection", Value: "database0.collection0"},
		{Key: "to", Value: "database0.foo"}, {Key: "dropTarget", Value: true}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00}, {Key: "collectionUUID", Value: specExists{}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "createIndexes"}, {Key: "ns", Value: ns00}, {Key: "operationDescription", Value: specExists{}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "rename"}, {Key: "ns", Value: ns00},
		{Key: "to", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "foo"}}},
		{Key: "operationDescription", Value: bson.D{{Key: "to", Value: specExists{}}, {Key: "dropTarget", Value: specExists{}}}}})
}

func TestChangeStreamSpecWhenShowExpandedEventsIsTrueCreateIndexEventsAreReported(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(nil, options.ChangeStream().SetShowExpandedEvents(true))
	if _, err := s.coll0().Indexes().CreateOne(s.ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetName("x_1")}); err != nil {
		t.Fatal(err)
	}
	// Creating the index created the collection first: a create event precedes it.
	ev, err := s.iterate(cs)
	if err != nil {
		t.Fatal(err)
	}
	if csGet(ev, "operationType") == "create" {
		ev, err = s.iterate(cs)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := specMatch("event", bson.D{{Key: "operationType", Value: "createIndexes"}}, ev, true); err != nil {
		t.Fatal(err)
	}
}

func TestChangeStreamSpecWhenShowExpandedEventsIsTrueDropIndexesEventsAreReported(t *testing.T) {
	s := newSpecEnv(t)
	if _, err := s.coll0().Indexes().CreateOne(s.ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetName("x_1")}); err != nil {
		t.Fatal(err)
	}
	cs := s.watch(nil, options.ChangeStream().SetShowExpandedEvents(true))
	if err := s.coll0().Indexes().DropOne(s.ctx, "x_1"); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "dropIndexes"}})
}

func TestChangeStreamSpecWhenShowExpandedEventsIsTrueCreateEventsAreReported(t *testing.T) {
	s := newSpecEnv(t)
	db := s.client.Database("database0")
	_ = db.Collection("foo").Drop(s.ctx)
	cs, err := db.Watch(s.ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if err := db.CreateCollection(s.ctx, "foo"); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "create"}})
}

func TestChangeStreamSpecWhenShowExpandedEventsIsTrueCreateEventsOnViewsAreReported(t *testing.T) {
	s := newSpecEnv(t)
	db := s.client.Database("database0")
	_ = db.Collection("foo").Drop(s.ctx)
	cs, err := db.Watch(s.ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if err := db.CreateView(s.ctx, "foo", "testName", mongo.Pipeline{}); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "create"}, {Key: "ns", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "foo"}}}})
}

// A view's create event, as a 6.0+ server reports it: the view's source and pipeline in
// operationDescription, no collectionUUID (a view has none), and nothing without
// showExpandedEvents. The events after it are unaffected.
func TestChangeStreamViewCreateEvent(t *testing.T) {
	s := newSpecEnv(t)
	db := s.client.Database("database0")
	plain, err := db.Watch(s.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(context.Background())
	cs, err := db.Watch(s.ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	pipeline := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "status", Value: "open"}}}}}
	if err := db.CreateView(s.ctx, "open", "orders", pipeline); err != nil {
		t.Fatal(err)
	}
	s.insert(db.Collection("orders"), bson.D{{Key: "_id", Value: 1}, {Key: "status", Value: "open"}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "create"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "open"}}},
		{Key: "collectionUUID", Value: specAbsent{}},
		{Key: "operationDescription", Value: bson.D{{Key: "viewOn", Value: "orders"},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "status", Value: "open"}}}}}}}}})
	// The orders collection is created by the insert: its create event, then the insert.
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "create"}, {Key: "ns", Value: bson.D{{Key: "db", Value: "database0"}, {Key: "coll", Value: "orders"}}}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}})
	s.expectEvent(plain, bson.D{{Key: "operationType", Value: "insert"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(1)}}}})
}

func TestChangeStreamSpecWhenShowExpandedEventsIsTrueModifyEventsAreReported(t *testing.T) {
	s := newSpecEnv(t)
	if _, err := s.coll0().Indexes().CreateOne(s.ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetName("x_2")}); err != nil {
		t.Fatal(err)
	}
	cs := s.watch(nil, options.ChangeStream().SetShowExpandedEvents(true))
	if err := s.client.Database("database0").RunCommand(s.ctx, bson.D{{Key: "collMod", Value: "collection0"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "modify"}})
}

// --- change-streams-resume-allowlist.json (the cases that apply to 4.3+ servers) ----------------

func TestChangeStreamSpecChangeStreamResumesAfterANetworkError(t *testing.T) {
	s := newSpecEnv(t)
	s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "closeConnection", Value: true}}}})
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "_id", Value: specExists{}}, {Key: "documentKey", Value: specExists{}},
		{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectResumed()
}

func TestChangeStreamSpecChangeStreamResumesAfterCursorNotFound(t *testing.T) {
	s := newSpecEnv(t)
	s.failPoint(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "errorCode", Value: 43}, {Key: "closeConnection", Value: false}}}})
	cs := s.watch(nil)
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "_id", Value: specExists{}}, {Key: "documentKey", Value: specExists{}},
		{Key: "operationType", Value: "insert"}, {Key: "ns", Value: ns00},
		{Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	s.expectResumed()
}

// --- change-streams-clusterTime.json -----------------------------------------------------------

func TestChangeStreamSpecClusterTimeIsPresent(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(nil)
	s.insert(s.coll0(), bson.D{{Key: "_id", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "ns", Value: ns00}, {Key: "clusterTime", Value: specAnyType("timestamp")}})
}

// --- README.md prose test 13 -------------------------------------------------------------------

// TestChangeStreamSpecProse13ResumesAfterKillCursorsOfItsCursor: the server-side cursor is
// killed behind the driver's back; the next getMore fails with CursorNotFound and the stream
// resumes.
func TestChangeStreamSpecProse13ResumesAfterKillCursorsOfItsCursor(t *testing.T) {
	s := newSpecEnv(t)
	cs := s.watch(nil)
	if err := s.global.Database("database0").RunCommand(s.ctx, bson.D{{Key: "killCursors", Value: "collection0"},
		{Key: "cursors", Value: bson.A{cs.ID()}}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.insert(s.globalColl("database0", "collection0"), bson.D{{Key: "x", Value: 1}})
	s.expectEvent(cs, bson.D{{Key: "operationType", Value: "insert"}, {Key: "fullDocument", Value: bson.D{{Key: "x", Value: 1}, {Key: "_id", Value: specExists{}}}}})
	if n := len(s.srv.CommandsNamed("aggregate")); n != 2 {
		t.Fatalf("%d aggregates, want a resume", n)
	}
}
