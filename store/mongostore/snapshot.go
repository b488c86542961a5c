package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store"
)

// snapshotDoc is a _wt_snapshots document, one per scope: its _id is laid out as the
// checkpoint's (the stream name for the shared scope, {stream, instance} for an instance's own).
type snapshotDoc struct {
	ID           any                `bson:"_id"`
	Stream       string             `bson:"stream"`
	Instance     string             `bson:"instance,omitempty"`
	SnapshotID   string             `bson:"id"`
	State        string             `bson:"state"`
	Reason       string             `bson:"reason,omitempty"`
	HandoffToken bson.Raw           `bson:"handoffToken,omitempty"`
	HandoffTime  bson.Timestamp     `bson:"handoffTime,omitempty"`
	Planned      bool               `bson:"planned"`
	Ranges       []snapshotRangeDoc `bson:"ranges"`
	Total        int64              `bson:"total"`
	StartedAt    time.Time          `bson:"startedAt"`
	UpdatedAt    time.Time          `bson:"updatedAt"`
	DoneAt       time.Time          `bson:"doneAt,omitempty"`
}

type snapshotRangeDoc struct {
	Min  bson.Raw `bson:"min,omitempty"`
	Max  bson.Raw `bson:"max,omitempty"`
	Last bson.Raw `bson:"last,omitempty"`
	Done bool     `bson:"done"`
	Read int64    `bson:"read"`
}

// LoadSnapshot returns scope's snapshot record; ok is false (err nil) if there is none.
func (s *Store) LoadSnapshot(ctx context.Context, scope store.Scope) (store.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Snapshot{}, false, err
	}
	var d snapshotDoc
	err := s.snapshots.FindOne(ctx, bson.D{{Key: "_id", Value: checkpointID(scope)}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.Snapshot{}, false, nil
	}
	if err != nil {
		return store.Snapshot{}, false, wrap(ctx, err, "load snapshot of %q", scope.String())
	}
	sn := store.Snapshot{Stream: scope.Stream, Instance: scope.Instance, ID: d.SnapshotID, State: d.State, Reason: d.Reason, HandoffToken: d.HandoffToken,
		HandoffTime: d.HandoffTime, Planned: d.Planned, Total: uint64(d.Total), StartedAt: d.StartedAt, UpdatedAt: d.UpdatedAt, DoneAt: d.DoneAt}
	if len(d.Ranges) > 0 {
		sn.Ranges = make([]store.SnapshotRange, len(d.Ranges))
		for i, r := range d.Ranges {
			sn.Ranges[i] = store.SnapshotRange{Min: r.Min, Max: r.Max, Last: r.Last, Done: r.Done, Read: uint64(r.Read)}
		}
	}
	return sn.Clone(), true, nil
}

// SaveSnapshot replaces the snapshot record of sn's scope with sn (an upsert by scope).
func (s *Store) SaveSnapshot(ctx context.Context, sn store.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := snapshotDoc{ID: checkpointID(sn.Scope()), Stream: sn.Stream, Instance: sn.Instance, SnapshotID: sn.ID, State: sn.State, Reason: sn.Reason, HandoffToken: sn.HandoffToken,
		HandoffTime: sn.HandoffTime, Planned: sn.Planned, Total: int64(sn.Total), Ranges: make([]snapshotRangeDoc, len(sn.Ranges)),
		StartedAt: sn.StartedAt, UpdatedAt: sn.UpdatedAt, DoneAt: sn.DoneAt}
	for i, r := range sn.Ranges {
		d.Ranges[i] = snapshotRangeDoc{Min: r.Min, Max: r.Max, Last: r.Last, Done: r.Done, Read: int64(r.Read)}
	}
	_, err := s.snapshots.ReplaceOne(ctx, bson.D{{Key: "_id", Value: d.ID}}, d, options.Replace().SetUpsert(true))
	if err != nil {
		return wrap(ctx, err, "save snapshot of %q", sn.Scope().String())
	}
	return nil
}
