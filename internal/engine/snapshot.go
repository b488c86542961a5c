package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/actors/streamtree"
	"github.com/watchtree/watchtree/messages"
)

// snapshotSource reads a stream's collection for its snapshot with the driver: primary reads,
// the snapshot Filter ANDed with the range bounds, sorted on _id (the _id index). It keeps
// names, not driver handles: a Database and a Collection handle cost ~1 KB together, every
// stream has a source, and most never snapshot, so the handles are made per read.
type snapshotSource struct {
	client    *mongo.Client
	db, coll  string
	filter    bson.Raw // nil: every document
	watcher   stream.Watcher
	comment   string
	signalsDB string // database of the on-demand snapshots' watermarks (SignalsCollection)
}

// newSnapshotSource returns the source of a snapshot of coll in db: filter (nil: every
// document) ANDed with every read, w (the stream's bounded watcher) for Watch, comment on its
// cursors, and signalsDB the database of the on-demand watermarks ("" for a snapshot that
// writes none).
func newSnapshotSource(client *mongo.Client, db, coll string, filter bson.Raw, w stream.Watcher, comment, signalsDB string) *snapshotSource {
	return &snapshotSource{client: client, db: db, coll: coll, filter: filter, watcher: w, comment: comment, signalsDB: signalsDB}
}

// collection returns a handle on the stream's collection.
func (s *snapshotSource) collection() *mongo.Collection {
	return s.client.Database(s.db).Collection(s.coll)
}

// Watch implements snapshot.Source with the stream's own watcher (its pipeline and namespace),
// resuming after token.
func (s *snapshotSource) Watch(ctx context.Context, token bson.Raw) (snapshot.IdleCursor, error) {
	return s.watcher.Open(ctx, stream.Position{Kind: messages.StartKind_START_KIND_RESUME_AFTER, Token: token,
		MaxAwaitTime: defaultMaxAwaitTime, Comment: s.comment})
}

// and returns the filter ANDed with extra conditions.
func (s *snapshotSource) and(extra ...bson.D) bson.D {
	var all bson.A
	if s.filter != nil {
		all = append(all, s.filter)
	}
	for _, e := range extra {
		all = append(all, e)
	}
	switch len(all) {
	case 0:
		return bson.D{}
	case 1:
		if d, ok := all[0].(bson.D); ok {
			return d
		}
	}
	return bson.D{{Key: "$and", Value: all}}
}

// Plan implements snapshot.Source: it counts the matching documents and reads the _id at every
// total×i/parts position of the _id order (a skip on the _id index, projected to _id). Both a
// real server and mongosim support it, unlike $bucketAuto and $sample. The split points must
// have one BSON type class: a range query on _id compares within one type only, so a collection
// whose _id values mix types (numbers and strings, say) is refused with an error naming them.
func (s *snapshotSource) Plan(ctx context.Context, parts int) (uint64, []bson.Raw, error) {
	n, err := s.collection().CountDocuments(ctx, s.and())
	if err != nil {
		return 0, nil, err
	}
	if n == 0 {
		return 0, nil, nil
	}
	first, err := s.idAt(ctx, 1, 0)
	if err != nil {
		return 0, nil, err
	}
	last, err := s.idAt(ctx, -1, 0)
	if err != nil {
		return 0, nil, err
	}
	if first == nil || last == nil {
		return uint64(n), nil, nil // emptied meanwhile
	}
	if a, b := typeClass(first), typeClass(last); a != b {
		return 0, nil, fmt.Errorf("%w: the collection's _id values mix BSON types (%s first, %s last); a snapshot reads _id ranges of one type",
			streamtree.ErrMixedIDTypes, bsonType(first), bsonType(last))
	}
	var splits []bson.Raw
	for i := 1; i < parts; i++ {
		at := n * int64(i) / int64(parts)
		if at == 0 {
			continue
		}
		id, err := s.idAt(ctx, 1, at)
		if err != nil {
			return 0, nil, err
		}
		if id == nil || (len(splits) > 0 && bytes.Equal(splits[len(splits)-1], id)) || bytes.Equal(first, id) {
			continue
		}
		splits = append(splits, id)
	}
	return uint64(n), splits, nil
}

// idAt returns {_id: v} of the matching document at position skip of the _id order (dir 1) or
// of its reverse (dir -1), nil when there is none.
func (s *snapshotSource) idAt(ctx context.Context, dir int, skip int64) (bson.Raw, error) {
	o := options.Find().SetSort(bson.D{{Key: "_id", Value: dir}}).SetProjection(bson.D{{Key: "_id", Value: 1}}).
		SetSkip(skip).SetLimit(1)
	cur, err := s.collection().Find(ctx, s.and(), o)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	if !cur.Next(ctx) {
		return nil, cur.Err()
	}
	v, err := cur.Current.LookupErr("_id")
	if err != nil {
		return nil, fmt.Errorf("snapshot: a document without _id: %w", err)
	}
	return bson.Raw(bsoncore.BuildDocumentFromElements(nil, bsoncore.AppendValueElement(nil, "_id", bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value}))), nil
}

// Read implements snapshot.Source.
func (s *snapshotSource) Read(ctx context.Context, lo, hi, after bson.Raw, limit int) ([]bson.Raw, error) {
	var conds []bson.D
	if after != nil {
		conds = append(conds, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after.Lookup("_id")}}}})
	} else if lo != nil {
		conds = append(conds, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: lo.Lookup("_id")}}}})
	}
	if hi != nil {
		conds = append(conds, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: hi.Lookup("_id")}}}})
	}
	return s.find(ctx, s.and(conds...), limit)
}

// find returns up to limit documents matching filter in _id order.
func (s *snapshotSource) find(ctx context.Context, filter bson.D, limit int) ([]bson.Raw, error) {
	o := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)).SetBatchSize(int32(limit))
	cur, err := s.collection().Find(ctx, filter, o)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := make([]bson.Raw, 0, limit)
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	return out, cur.Err()
}

// OplogWindow implements snapshot.Source: the wall times of the first and last entries of
// local.oplog.rs in natural order. A server that refuses the read (no permission) or has no
// such collection gives ok false: the window is then unknown and not guarded.
func (s *snapshotSource) OplogWindow(ctx context.Context) (first, last time.Time, ok bool) {
	read := func(dir int) (time.Time, bool) {
		var e struct {
			TS   bson.Timestamp `bson:"ts"`
			Wall time.Time      `bson:"wall"`
		}
		o := options.FindOne().SetSort(bson.D{{Key: "$natural", Value: dir}}).SetProjection(bson.D{{Key: "ts", Value: 1}, {Key: "wall", Value: 1}})
		if err := s.client.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{}, o).Decode(&e); err != nil {
			return time.Time{}, false
		}
		if !e.Wall.IsZero() {
			return e.Wall, true
		}
		return time.Unix(int64(e.TS.T), 0), e.TS.T != 0
	}
	f, ok1 := read(1)
	l, ok2 := read(-1)
	return f, l, ok1 && ok2 && !l.Before(f)
}

// typeClass maps the _id's BSON type to its comparison class: numbers compare with each other.
func typeClass(idDoc bson.Raw) bson.Type {
	t := idDoc.Lookup("_id").Type
	switch t {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return bson.TypeDouble
	}
	return t
}

func bsonType(idDoc bson.Raw) string { return idDoc.Lookup("_id").Type.String() }

// ReadMatching implements snapshot.OnDemandSource: the request's filter ANDed with the stream's
// snapshot Filter and _id > after, in _id order.
func (s *snapshotSource) ReadMatching(ctx context.Context, filter, after bson.Raw, limit int) ([]bson.Raw, error) {
	var conds []bson.D
	if filter != nil {
		var d bson.D
		if err := bson.Unmarshal(filter, &d); err != nil {
			return nil, err
		}
		conds = append(conds, d)
	}
	if after != nil {
		conds = append(conds, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after.Lookup("_id")}}}})
	}
	return s.find(ctx, s.and(conds...), limit)
}

// Mark implements snapshot.OnDemandSource: it inserts doc into SignalsCollection in a session
// and returns the session's operation time (the insert's cluster time).
func (s *snapshotSource) Mark(ctx context.Context, doc bson.D) (bson.Timestamp, error) {
	sess, err := s.client.StartSession()
	if err != nil {
		return bson.Timestamp{}, err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	if _, err := s.client.Database(s.signalsDB).Collection(SignalsCollection).InsertOne(mongo.NewSessionContext(ctx, sess), doc); err != nil {
		return bson.Timestamp{}, err
	}
	ot := sess.OperationTime()
	if ot == nil || ot.IsZero() {
		return bson.Timestamp{}, errors.New("the server returned no operationTime for the watermark write")
	}
	return *ot, nil
}
