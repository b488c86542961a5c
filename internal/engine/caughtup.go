package engine

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/internal/superclient"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/status"
)

// AwaitCaughtUp is Handle.AwaitCaughtUp: it reads the server's cluster time now (ClusterTime),
// then asks the supervisor to answer once the stream's settled position is past it, bounded by
// ctx (defaultSpawnTimeout without a deadline).
func (e *Entry) AwaitCaughtUp(ctx context.Context) error {
	if _, err := e.rt.system(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultSpawnTimeout)
		defer cancel()
	}
	ts, err := e.ClusterTime(ctx)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: await caught up: %w", e.name, err)
	}
	pid := e.SupervisorPID()
	if pid == nil {
		return fmt.Errorf("watchtree: stream %q: its supervisor is not running: %w", e.name, ErrStreamNotRunning)
	}
	r, err := superclient.New(e.rt.sys).AwaitCaughtUp(ctx, pid, &messages.ClusterTime{Seconds: ts.T, Increment: ts.I})
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: await caught up to %d.%d: %w", e.name, ts.T, ts.I, err)
	}
	if r.GetStatus() != nil {
		e.remember(r.GetStatus())
	}
	if r.GetCaughtUp() {
		return nil
	}
	st := statusx.Read(r.GetStatus(), e.Local())
	if st.State == status.Standby {
		return fmt.Errorf("watchtree: stream %q: in standby here (%s), so this instance settles nothing: %w: %w",
			e.name, st.Why, ErrStandby, ErrStreamNotRunning)
	}
	return fmt.Errorf("watchtree: stream %q: %s (%s) before it caught up to %d.%d: %w", e.name, st.State, st.Why,
		ts.T, ts.I, ErrStreamNotRunning)
}

// ClusterTime returns the stream's deployment's cluster time now, at full precision: the
// operationTime of a ping on the stream's client (the newest operation the server applied, so
// every write acknowledged before the call is at or before it), else its $clusterTime. A
// deployment that reports neither (a standalone server, which has no change streams) is an error.
func (e *Entry) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	raw, err := e.watcher.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Raw()
	if err != nil {
		return bson.Timestamp{}, fmt.Errorf("read the cluster time (ping): %w", err)
	}
	if t, i, ok := raw.Lookup("operationTime").TimestampOK(); ok {
		return bson.Timestamp{T: t, I: i}, nil
	}
	if t, i, ok := raw.Lookup("$clusterTime", "clusterTime").TimestampOK(); ok {
		return bson.Timestamp{T: t, I: i}, nil
	}
	return bson.Timestamp{}, fmt.Errorf("read the cluster time: the server's ping reply has no operationTime or $clusterTime (not a replica set?)")
}
