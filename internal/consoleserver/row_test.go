package consoleserver

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/readings"
	"github.com/watchtree/watchtree/internal/superclient"
	"github.com/watchtree/watchtree/messages"
)

// TestRowFigures: lag, distance to the newest oplog entry, token headroom and events/s come
// out of a supervisor's status, the oplog window and the rate samples as documented.
func TestRowFigures(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	now := time.Unix(1_800_000_100, 0).UTC()
	read := now.Add(-3 * time.Second)
	// The saved token starts with cluster time now-60s (0x82 + seconds<<32 | increment).
	saved := now.Add(-60 * time.Second)
	data := "82" + hex8(uint64(saved.Unix())<<32|1) + "0004"
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: data}})
	status := &messages.StatusReply{Stream: "s", State: messages.SupervisorState_SUPERVISOR_STATE_BACKOFF, Why: "cursor died",
		Attempt: 2, MaxAttempts: 5, NextRetryAt: timestamppb.New(now.Add(4 * time.Second)), LastCause: "boom",
		InFlight: 7, ReadThrough: timestamppb.New(read), Settlements: &messages.SettlementCounts{Settled: 150, DeadLettered: 2, Dropped: 1},
		Checkpoint: &messages.CheckpointWritten{Token: tok, Source: "event", WrittenAt: timestamppb.New(now.Add(-time.Second))}}
	sup := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.StatusRequest); ok {
			c.Respond(status)
		}
	}))
	in := newInspector(Config{}.withDefaults(), nil)
	in.sys, in.sc, in.work, in.clk, in.log = sys, superclient.New(sys), context.Background(), clock.Real(), zap.NewNop()
	samples := []sample{{at: now.Add(-10 * time.Second), settled: 50}}
	oplog := readings.Oplog{Oldest: now.Add(-2 * time.Hour), Newest: now.Add(-1 * time.Second)}
	r := in.row(context.Background(), StreamRef{Name: "s", Namespace: "db.c", Mode: "AllInstances", Cursor: "dedicated",
		Warnings: []string{"instance warning"}, Supervisor: sup},
		samples, readings.Count{N: 9}, oplog, now)
	checks := []struct {
		what string
		ok   bool
	}{
		{"state", r.GetState() == "backoff" && r.GetWhy() == "cursor died"},
		{"restart", r.GetAttempt() == 2 && r.GetMaxAttempts() == 5 && r.GetNextRetryAt().AsTime().Equal(now.Add(4*time.Second))},
		{"lag = now - read_through", r.GetLag().AsDuration() == 3*time.Second},
		{"behind the newest oplog entry", r.GetOplogBehind().AsDuration() == 2*time.Second},
		{"token headroom = saved - oldest", r.GetTokenHeadroom().AsDuration() == 2*time.Hour-60*time.Second},
		{"checkpoint time from the token", r.GetCheckpointTime().AsTime().Equal(saved) && r.GetCheckpointToken() == data},
		{"events/s over the window", r.GetEventsPerSec() == 10},
		{"in flight", r.GetInFlight() == 7},
		{"dead letters", r.GetDeadLetters() == 9 && r.GetDeadLettered() == 3},
		{"an AllInstances stream has no role", r.GetRole() == ""},
		{"the instance's view: namespace, mode, cursor, warnings", r.GetNamespace() == "db.c" && r.GetMode() == "AllInstances" &&
			r.GetCursor() == "dedicated" && r.GetNote() == "instance warning"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: row %v", c.what, r)
		}
	}
	// Without an oplog window the oplog figures are left out.
	r = in.row(context.Background(), StreamRef{Name: "s", Supervisor: sup}, nil, readings.Count{}, readings.Oplog{Reading: readings.Reading{Unknown: "no oplog"}}, now)
	if r.GetOplogBehind() != nil || r.GetTokenHeadroom() != nil || r.GetLag() == nil {
		t.Errorf("no oplog: %v", r)
	}
}

func hex8(u uint64) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = digits[u&0xf]
		u >>= 4
	}
	return string(b)
}
