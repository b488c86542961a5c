package engine

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// oplogWindow returns the cluster times of the oldest and newest entries of the oplog
// (local.oplog.rs) of client's deployment, read with two one-document finds bounded by ctx and
// connect (watchtree.Runtime.OplogWindow).
func oplogWindow(ctx context.Context, client *mongo.Client, connect time.Duration) (oldest, newest time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	coll := client.Database("local").Collection("oplog.rs")
	read := func(dir int) (time.Time, error) {
		var doc struct {
			TS bson.Timestamp `bson:"ts"`
		}
		err := coll.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "$natural", Value: dir}}).
			SetProjection(bson.D{{Key: "ts", Value: 1}})).Decode(&doc)
		if err != nil {
			return time.Time{}, err
		}
		if doc.TS.T == 0 {
			return time.Time{}, errors.New("oplog entry without ts")
		}
		return time.Unix(int64(doc.TS.T), 0).UTC(), nil
	}
	if oldest, err = read(1); err != nil {
		return time.Time{}, time.Time{}, err
	}
	if newest, err = read(-1); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return oldest, newest, nil
}
