package watchtree

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/actors/dispatcher"
)

// benchOrder is the order document of the reference benchmarks (test/bench uses the same).
type benchOrder struct {
	ID     bson.ObjectID `bson:"_id"`
	I      int64         `bson:"i"`
	Status string        `bson:"status"`
	Amount float64       `bson:"amount"`
}

// BenchmarkRouteAgainstReference compares a lane's work per event, in steady state (Route, the
// handler's Call and the invocation's Release, the Event reused), with the reference consumer's
// (test/bench: Lookup of fullDocument, Unmarshal into the struct, Lookup of _id) on the same
// insert event, in the same run: compare the two ns/op and B/op.
func BenchmarkRouteAgainstReference(b *testing.B) {
	oid := bson.NewObjectID()
	raw := changeEvent(b, "insert", "8266EFEDC0000000012B022C0100296E5A1004", bson.E{Key: "fullDocument", Value: benchOrder{ID: oid, I: 7, Status: "new", Amount: 12.5}},
		bson.E{Key: "ns", Value: nsDoc("shop", "orders")},
		bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: oid}}})
	var sink int64
	b.Run("watchtree", func(b *testing.B) {
		s := Stream[benchOrder]{Name: "s", OnInsert: func(_ context.Context, ev *Event[benchOrder]) error { sink += ev.FullDocument.I; return nil }}
		cs, err := s.compile()
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			inv, _, err := cs.Router.Route(raw)
			if err != nil {
				b.Fatal(err)
			}
			if err := inv.Call(ctx, 1); err != nil {
				b.Fatal(err)
			}
			inv.(dispatcher.Releaser).Release()
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o benchOrder
			if err := raw.Lookup("fullDocument").Unmarshal(&o); err != nil {
				b.Fatal(err)
			}
			sink += o.I
			_ = raw.Lookup("_id")
		}
	})
}
