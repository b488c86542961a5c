package mongostore

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// leaseFeed reads the lease collection's change stream for WatchLease until ctx ends (the last
// watch ended), reopening it a second after a failure. Only the document key travels: the
// watcher reads the record itself.
func (s *Store) leaseFeed(ctx context.Context) {
	pipeline := mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "documentKey", Value: 1}}}}}
	for reopened := false; ctx.Err() == nil; reopened = true {
		cs, err := s.leases.Watch(ctx, pipeline, options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err == nil {
			if reopened {
				s.watches.NotifyAll()
			}
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
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
