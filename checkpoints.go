package watchtree

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// CheckpointInfo is one stored resume position of a stream, as Runtime.Checkpoints lists it for
// operators and the console.
type CheckpointInfo struct {
	// Stream is the stream name. Instance is the instance whose own position it is (its
	// Config.InstanceName) on an AllInstances stream; empty for the shared position: a
	// SingleLeader stream's, or, on an AllInstances stream, the one record per stream of an
	// earlier version, which an instance without a checkpoint of its own takes as its starting
	// point (see the README's operations section).
	Stream, Instance string
	// Token is the resume token to resume after; nil when the position is known only by
	// ClusterTime (a StartPosition At start before any event).
	Token bson.Raw
	// ClusterTime is the cluster time of the position when known; zero otherwise.
	ClusterTime bson.Timestamp
	// Source says how the position was obtained: "event", "pbrt", "initial", "invalidate",
	// "resumeFromNow", "rebuild", "migrated".
	Source string
	// Owner is the Config.InstanceID of the process that wrote it; Epoch its fencing epoch
	// (SingleLeader; 0 otherwise); Settled the events its writer had settled.
	Owner   string
	Epoch   int64
	Settled uint64
	// UpdatedAt is when it was written (the writer's clock); Age is the time since, on the
	// runtime's clock, when listed.
	UpdatedAt time.Time
	Age       time.Duration
	// ExpiresAt is when it expires if not written again (UpdatedAt + CheckpointPolicy.Retention
	// for an instance's own position); zero: never.
	ExpiresAt time.Time
}

// Checkpoints lists the stored, unexpired checkpoints of a stream: on an AllInstances stream
// each instance's own (every instance that ran the stream within its retention, this one
// included), and the shared one when there is one; on a SingleLeader stream the shared one.
// The shared one comes first, then the instances' by name. An Ephemeral stream has none of
// its own. The stream must be registered on rt (by Spawn or Props; it need not be running), so
// that its store is known; another name fails with an error matching ErrUnknownStream, as
// Handle does. It fails with ErrNotStarted before Start. It reads the store once, bounded by
// ctx.
func (rt *Runtime) Checkpoints(ctx context.Context, stream string) ([]CheckpointInfo, error) {
	list, err := rt.e.Checkpoints(ctx, stream)
	if err != nil {
		return nil, err
	}
	now := rt.e.Now()
	out := make([]CheckpointInfo, len(list))
	for i, cp := range list {
		out[i] = checkpointInfoOf(cp, now)
	}
	return out, nil
}

// InstanceName returns this instance's name (Config.InstanceName, defaulted to the hostname):
// the Instance of the checkpoints, dead letters and gap records its AllInstances streams write.
func (rt *Runtime) InstanceName() string { return rt.cfg.InstanceName }

func checkpointInfoOf(cp store.Checkpoint, now time.Time) CheckpointInfo {
	return CheckpointInfo{
		Stream: cp.Stream, Instance: cp.Instance, Token: cp.Token, ClusterTime: cp.ClusterTime, Source: cp.Source,
		Owner: cp.Owner, Epoch: cp.Epoch, Settled: cp.Settled, UpdatedAt: cp.UpdatedAt, Age: now.Sub(cp.UpdatedAt),
		ExpiresAt: cp.ExpiresAt,
	}
}
