package watchtree

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/tokentime"
)

// TokenClusterTime returns the cluster time a resume token (StreamStatus.Checkpoint,
// Event.ResumeToken) starts with, to the second; ok is false for a token that is not of the
// server's shape. Against OplogWindow's oldest entry it tells how long the token can still be
// resumed from.
func TokenClusterTime(token bson.Raw) (time.Time, bool) {
	at, _, ok := tokentime.Of(token)
	return at, ok
}

// OplogWindow returns the cluster times of the oldest and newest entries of the oplog
// (local.oplog.rs) of Config.Client's deployment, read with two one-document finds bounded by
// ctx and ConnectTimeout. newest minus oldest is the oplog window; a saved resume token older
// than oldest can no longer be resumed (history lost). A deployment that does not let the
// client read it (no permission on local, a sharded cluster through mongos, a server without an
// oplog) returns that error; callers degrade to not knowing the window.
func (rt *Runtime) OplogWindow(ctx context.Context) (oldest, newest time.Time, err error) {
	return rt.e.OplogWindow(ctx)
}
