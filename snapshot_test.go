package watchtree

import (
	"context"
	"errors"
	"github.com/watchtree/watchtree/internal/policyx"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/messages"
)

func TestStreamSnapshotValidate(t *testing.T) {
	initial := SnapshotPolicy{Mode: SnapshotInitial}
	tests := []struct {
		name   string
		mutate func(s *Stream[testOrder])
		field  string // "" = valid
		rule   string
	}{
		{"initial on a collection", func(s *Stream[testOrder]) { s.Snapshot = initial }, "", ""},
		{"when needed, default OnHistoryLost", func(s *Stream[testOrder]) { s.Snapshot.Mode = SnapshotWhenNeeded }, "", ""},
		{"rebuild from snapshot alone", func(s *Stream[testOrder]) { s.OnHistoryLost = RebuildFromSnapshot }, "", ""},
		{"only OnSnapshot", func(s *Stream[testOrder]) { s.OnInsert = nil; s.OnSnapshot = nopHandler; s.Snapshot = initial }, "", ""},
		{"database stream", func(s *Stream[testOrder]) { s.Collection = ""; s.Database = "shop"; s.Snapshot = initial },
			"Snapshot.Mode", "needs a Collection stream"},
		{"cluster stream rebuild", func(s *Stream[testOrder]) { s.Collection = ""; s.OnHistoryLost = RebuildFromSnapshot },
			"OnHistoryLost", "got a cluster stream"},
		{"when needed with ResumeFromNow", func(s *Stream[testOrder]) {
			s.Snapshot.Mode = SnapshotWhenNeeded
			s.OnHistoryLost = ResumeFromNow
		}, "OnHistoryLost", "RebuildFromSnapshot with Snapshot.Mode SnapshotWhenNeeded"},
		{"with At", func(s *Stream[testOrder]) { s.Snapshot = initial; s.StartPosition = At(time.Unix(1_700_000_000, 0)) },
			"Snapshot.Mode", "StartPosition At"},
		{"partitions", func(s *Stream[testOrder]) { s.Snapshot = SnapshotPolicy{Mode: SnapshotInitial, Partitions: 1000} },
			"Snapshot.Partitions", "between 1 and 256"},
		{"batch size", func(s *Stream[testOrder]) { s.Snapshot.BatchSize = -1 }, "Snapshot.BatchSize", "between 1 and"},
		{"filter", func(s *Stream[testOrder]) { s.Snapshot.Filter = "status" }, "Snapshot.Filter", "must marshal"},
		{"mode", func(s *Stream[testOrder]) { s.Snapshot.Mode = 9 }, "Snapshot.Mode", "SnapshotMode(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validStream()
			tt.mutate(&s)
			err := s.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.rule) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v; want a ConfigError on %s saying %q", err, tt.field, tt.rule)
			}
		})
	}
}

func TestStreamSnapshotCompile(t *testing.T) {
	s := validStream()
	s.Snapshot = SnapshotPolicy{Mode: SnapshotWhenNeeded, Filter: bson.M{"k": 1}}
	cs, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	if policyx.HistoryLostKindOf(cs.OnHistoryLost) != policyx.HistoryRebuildFromSnapshot || !cs.Snapshots() {
		t.Errorf("SnapshotWhenNeeded compiles OnHistoryLost to %v, want RebuildFromSnapshot", cs.OnHistoryLost)
	}
	if cs.Snapshot.Partitions != 4 || cs.Snapshot.BatchSize != 1000 || cs.SnapshotFilter == nil {
		t.Errorf("compiled snapshot %+v, filter %v", cs.Snapshot, cs.SnapshotFilter)
	}
	if plain, _ := validStream().compile(); plain.Snapshots() {
		t.Error("a stream without a snapshot policy has a snapshot actor")
	}
}

// TestRouterSnapshotEvents: a snapshot event reaches OnSnapshot, else OnChange, decoded like a
// change event, with the stable ID the snapshot actor gives it.
func TestRouterSnapshotEvents(t *testing.T) {
	raw := snapshotEventForTest(t)
	var got *Event[testOrder]
	var via string
	record := func(name string) Handler[testOrder] {
		return func(_ context.Context, ev *Event[testOrder]) error { got, via = ev, name; return nil }
	}
	for _, tc := range []struct {
		s    Stream[testOrder]
		want string
	}{
		{Stream[testOrder]{Name: "s", OnSnapshot: record("snapshot"), OnChange: record("change")}, "snapshot"},
		{Stream[testOrder]{Name: "s", OnInsert: record("insert"), OnChange: record("change")}, "change"},
	} {
		inv, outcome, err := newRouter(tc.s).Route(raw)
		if err != nil || inv == nil {
			t.Fatalf("Route: %v %v", outcome, err)
		}
		if err := inv.Call(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if via != tc.want || got.OperationType() != OpSnapshot || !got.OperationType().Known() {
			t.Fatalf("routed to %s as %s, want %s", via, got.OperationType(), tc.want)
		}
		if id, _ := got.DocumentID().AsInt64OK(); id != 42 || got.FullDocument == nil || !got.Changed("x") {
			t.Fatalf("event %+v: want document 42", got)
		}
		if !strings.HasPrefix(got.ID(), "snapshot:snap1:shop.orders:") || !got.ClusterTime().IsZero() {
			t.Fatalf("ID %q, cluster time %v", got.ID(), got.ClusterTime())
		}
	}
	if inv, outcome, _ := newRouter(Stream[testOrder]{Name: "s", OnInsert: nopHandler}).Route(raw); inv != nil ||
		outcome != messages.Outcome_OUTCOME_UNHANDLED {
		t.Fatalf("a snapshot event without OnSnapshot or OnChange: %v, want unhandled", outcome)
	}
}

// snapshotEventForTest rebuilds the documented shape of a snapshot event (the snapshot actor's
// own builder is tested in its package).
func snapshotEventForTest(t *testing.T) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "snapshot:snap1:shop.orders:12" + "2a00000000000000"}}},
		{Key: "operationType", Value: "snapshot"},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int64(42)}}},
		{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: int64(42)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
