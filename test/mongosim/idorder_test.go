package mongosim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// idoFindRaw runs find with sort/skip/limit and returns the raw documents.
func idoFindRaw(t *testing.T, c *mongo.Collection, filter, sort bson.D, skip, limit int64) []bson.Raw {
	t.Helper()
	ctx := testCtx(t)
	o := options.Find().SetSort(sort).SetBatchSize(7)
	if skip > 0 {
		o.SetSkip(skip)
	}
	if limit > 0 {
		o.SetLimit(limit)
	}
	cur, err := c.Find(ctx, filter, o)
	if err != nil {
		t.Fatalf("find %v sort %v: %v", filter, sort, err)
	}
	return idoDrain(t, ctx, cur)
}

// idoAggRaw runs the same query as an aggregation ($match, $sort, $skip, $limit): the
// aggregation sorts the matches itself, so it is the reference for the index-served find.
func idoAggRaw(t *testing.T, c *mongo.Collection, filter, sort bson.D, skip, limit int64) []bson.Raw {
	t.Helper()
	ctx := testCtx(t)
	p := mongo.Pipeline{{{Key: "$match", Value: filter}}, {{Key: "$sort", Value: sort}}}
	if skip > 0 {
		p = append(p, bson.D{{Key: "$skip", Value: skip}})
	}
	if limit > 0 {
		p = append(p, bson.D{{Key: "$limit", Value: limit}})
	}
	cur, err := c.Aggregate(ctx, p)
	if err != nil {
		t.Fatalf("aggregate %v: %v", p, err)
	}
	return idoDrain(t, ctx, cur)
}

func idoDrain(t *testing.T, ctx context.Context, cur *mongo.Cursor) []bson.Raw {
	t.Helper()
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("cursor: %v", err)
	}
	_ = cur.Close(ctx)
	return out
}

// idoRandomID returns an _id of one of several BSON types, numbers of three kinds among them.
func idoRandomID(rng *rand.Rand) any {
	n := rng.Intn(400)
	switch rng.Intn(6) {
	case 0:
		return int32(n)
	case 1:
		return int64(n) + 1000
	case 2:
		return float64(n) + 0.5
	case 3:
		return fmt.Sprintf("k%03d", n)
	case 4:
		var oid bson.ObjectID
		oid[11], oid[10] = byte(n), byte(n>>8)
		return oid
	}
	return bson.NewDateTimeFromTime(bson.DateTime(int64(n) * 1000).Time())
}

// idoCheck compares index-served finds with the aggregation reference over many ranges, and
// asks validate whether the ordered _id index agrees with the documents.
func idoCheck(t *testing.T, c *mongo.Collection, rng *rand.Rand) {
	t.Helper()
	for q := 0; q < 60; q++ {
		var conds bson.A
		lo, hi := idoRandomID(rng), idoRandomID(rng)
		ops := []string{"$gt", "$gte", "$lt", "$lte", "$eq"}
		switch rng.Intn(6) {
		case 0: // every document
		case 1:
			conds = bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: ops[rng.Intn(2)], Value: lo}}}}}
		case 2:
			conds = bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: ops[2+rng.Intn(2)], Value: hi}}}}}
		case 3:
			conds = bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: ops[rng.Intn(2)], Value: lo}, {Key: ops[2+rng.Intn(2)], Value: hi}}}}}
		case 4: // the snapshot's shape: $and of two ranges, and another field
			conds = bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: lo}}}}, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: hi}}}}}
			if rng.Intn(2) == 0 {
				conds = append(conds, bson.D{{Key: "v", Value: bson.D{{Key: "$gte", Value: int32(rng.Intn(5))}}}})
			}
		case 5:
			conds = bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: ops[rng.Intn(len(ops))], Value: lo}}}}}
		}
		filter := bson.D{}
		if len(conds) > 0 {
			filter = bson.D{{Key: "$and", Value: conds}}
		}
		sort := bson.D{{Key: "_id", Value: int32(1 - 2*rng.Intn(2))}}
		skip, limit := int64(rng.Intn(3)), int64(rng.Intn(40))
		got := idoFindRaw(t, c, filter, sort, skip, limit)
		want := idoAggRaw(t, c, filter, sort, skip, limit)
		if len(got) != len(want) {
			t.Fatalf("find %v sort %v skip %d limit %d: %d documents, the aggregation %d", filter, sort, skip, limit, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("find %v sort %v: document %d is %s, the aggregation's %s", filter, sort, i, got[i], want[i])
			}
		}
	}
	var res struct {
		Valid  bool     `bson:"valid"`
		Errors []string `bson:"errors"`
	}
	if err := c.Database().RunCommand(testCtx(t), bson.D{{Key: "validate", Value: c.Name()}}).Decode(&res); err != nil || !res.Valid {
		t.Fatalf("validate: %v %+v", err, res)
	}
}

// TestIDOrderServesRangeReads: finds sorted on _id (with _id ranges of every bound kind, skip
// and limit, both directions, _id values of several types) return what the aggregation's own
// sort returns, byte for byte, after inserts, deletes, updates, upserts and transactions.
func TestIDOrderServesRangeReads(t *testing.T) {
	_, cl := startServer(t, Options{})
	ctx := testCtx(t)
	c := cl.Database("ido").Collection("c")
	rng := rand.New(rand.NewSource(11))
	seen := map[string]any{}
	var ids []any
	for len(ids) < 300 {
		id := idoRandomID(rng)
		k := fmt.Sprint(id)
		if _, dup := seen[k]; dup {
			continue
		}
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: int32(rng.Intn(8))}}); err != nil {
			if mongo.IsDuplicateKeyError(err) { // 3 and 3.0 are one _id
				seen[k] = id
				continue
			}
			t.Fatalf("insert %v: %v", id, err)
		}
		seen[k] = id
		ids = append(ids, id)
	}
	idoCheck(t, c, rng)

	for i := 0; i < 200; i++ {
		id := ids[rng.Intn(len(ids))]
		var err error
		switch rng.Intn(4) {
		case 0:
			_, err = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		case 1:
			_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: int32(1)}}}})
		case 2:
			_, err = c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "v", Value: int32(9)}, {Key: "r", Value: true}},
				options.Replace().SetUpsert(true))
		case 3:
			_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: idoRandomID(rng)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: true}}}},
				options.UpdateOne().SetUpsert(true))
			if mongo.IsDuplicateKeyError(err) {
				err = nil
			}
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	idoCheck(t, c, rng)

	// A transaction sees its own inserts and deletes in _id order; after the commit so does
	// everyone, and an aborted transaction leaves the index as it was.
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	for _, commit := range []bool{false, true} {
		if err := sess.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, sess)
		if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: int32(-5)}, {Key: "v", Value: int32(1)}}); err != nil {
			t.Fatalf("insert in the transaction: %v", err)
		}
		if _, err := c.DeleteOne(sctx, bson.D{{Key: "_id", Value: ids[0]}}); err != nil {
			t.Fatalf("delete in the transaction: %v", err)
		}
		cur, err := c.Find(sctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: int32(0)}}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		if in := idoDrain(t, sctx, cur); len(in) != 1 || in[0].Lookup("_id").Int32() != -5 {
			t.Fatalf("the transaction's _id range read = %v, want its own insert -5", in)
		}
		if commit {
			err = sess.CommitTransaction(ctx)
		} else {
			err = sess.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := idoFindRaw(t, c, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: int32(0)}}}}, bson.D{{Key: "_id", Value: 1}}, 0, 0)
		if want := map[bool]int{false: 0, true: 1}[commit]; len(out) != want {
			t.Fatalf("after the transaction (commit %v): %d documents below 0, want %d", commit, len(out), want)
		}
		idoCheck(t, c, rng)
	}
}
