package mongostore

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// leaseFeed is WatchLease's leasewatch.Feed: the lease collection's change stream, of which
// only the document key travels (the watcher reads the record itself).
func (s *Store) leaseFeed(ctx context.Context, opened func()) {
	pipeline := mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "documentKey", Value: 1}}}}}
	cs, err := s.leases.Watch(ctx, pipeline, options.ChangeStream().SetMaxAwaitTime(time.Second))
	if err != nil {
		return
	}
	opened()
	for cs.Next(ctx) {
		if name, ok := cs.Current.Lookup("documentKey", "_id").StringValueOK(); ok {
			s.watches.Notify(name)
		}
	}
	// Bounded: killCursors on a dead server would otherwise wait for server selection.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	_ = cs.Close(cctx)
	cancel()
}
