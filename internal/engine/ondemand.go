package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/configerr"
	"github.com/watchtree/watchtree/internal/superclient"
	"github.com/watchtree/watchtree/internal/treekit"
)

// ondemandIDs numbers the on-demand snapshots of this process.
var ondemandIDs atomic.Uint64

// Snapshot asks the supervisor for an on-demand snapshot of the documents filter matches (nil:
// every document) and returns its id (Handle.Snapshot; the stream is a collection stream). A
// filter the server refuses fails with a *configerr.Error naming SnapshotRequest.Filter;
// ErrSnapshotRunning while one runs, ErrStreamNotRunning unless the stream runs here.
func (e *Entry) Snapshot(ctx context.Context, filter bson.Raw) (string, error) {
	if _, err := e.rt.system(); err != nil {
		return "", err
	}
	if filter != nil {
		// A bad operator is the server's to find: ask it once, on the caller's goroutine.
		coll := e.watcher.Client.Database(e.watcher.Database).Collection(e.spec.Collection)
		if err := coll.FindOne(ctx, filter, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err(); err != nil &&
			!errors.Is(err, mongo.ErrNoDocuments) {
			return "", &configerr.Error{Stream: e.name, Field: "SnapshotRequest.Filter",
				Rule: fmt.Sprintf("the server refused the query %s: %v", filter.String(), err)}
		}
	}
	pid := e.SupervisorPID()
	if pid == nil {
		return "", fmt.Errorf("watchtree: stream %q: its supervisor is not running: %w", e.name, ErrStreamNotRunning)
	}
	id := "ondemand-" + strconv.FormatInt(e.rt.clk.Now().UnixMilli(), 36) + "-" + strconv.FormatUint(ondemandIDs.Add(1), 10)
	r, err := superclient.New(e.rt.sys).OnDemandSnapshot(ctx, pid, id, filter)
	if err != nil {
		return "", fmt.Errorf("watchtree: stream %q: snapshot: %w", e.name, err)
	}
	switch r.GetCode() {
	case "":
		return id, nil
	case treekit.OnDemandBusy:
		return "", fmt.Errorf("watchtree: stream %q: snapshot %s: %w", e.name, r.GetRunning(), ErrSnapshotRunning)
	case treekit.OnDemandNotRunning:
		return "", fmt.Errorf("watchtree: stream %q: %s: %w", e.name, r.GetError(), ErrStreamNotRunning)
	default:
		return "", fmt.Errorf("watchtree: stream %q: snapshot: %s", e.name, r.GetError())
	}
}
