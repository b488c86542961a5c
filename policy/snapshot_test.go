package policy

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/configerr"
)

func TestSnapshotDefaultsAndValidate(t *testing.T) {
	d := withDefaultsOf(Snapshot{})
	if d.Partitions != defaultSnapshotPartitions || d.BatchSize != defaultSnapshotBatchSize || d.Mode != SnapshotNever ||
		d.HandoffRefresh != defaultSnapshotHandoffRefresh {
		t.Fatalf("defaults: %+v", d)
	}
	if snapshotEnabled(Snapshot{}) || !snapshotEnabled(Snapshot{Mode: SnapshotInitial}) || !snapshotEnabled(Snapshot{Mode: SnapshotWhenNeeded}) {
		t.Fatal("Enabled: wrong for the modes")
	}
	if err := (Snapshot{Mode: SnapshotInitial, Filter: bson.D{{Key: "a", Value: 1}}, Partitions: 8, BatchSize: 50}).Validate(); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
	cases := []struct {
		p     Snapshot
		field string
	}{
		{Snapshot{Mode: 7}, "SnapshotPolicy.Mode"},
		{Snapshot{Partitions: -1}, "SnapshotPolicy.Partitions"},
		{Snapshot{Partitions: maxSnapshotPartitions + 1}, "SnapshotPolicy.Partitions"},
		{Snapshot{BatchSize: -5}, "SnapshotPolicy.BatchSize"},
		{Snapshot{BatchSize: maxSnapshotBatchSize + 1}, "SnapshotPolicy.BatchSize"},
		{Snapshot{Filter: 42}, "SnapshotPolicy.Filter"},
		{Snapshot{HandoffRefresh: -1}, "SnapshotPolicy.HandoffRefresh"},
		{Snapshot{Filter: bson.Raw{1, 2}}, "SnapshotPolicy.Filter"},
	}
	for _, c := range cases {
		err := c.p.Validate()
		var ce *configerr.Error
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, configerr.ErrInvalid) {
			t.Errorf("%+v: error %v, want a configerr.Error on %s", c.p, err, c.field)
		}
	}
	raw, err := marshalFilter(Snapshot{Filter: bson.M{"status": "open"}})
	if err != nil || !strings.Contains(raw.String(), "open") {
		t.Fatalf("marshalFilter: %v %v", raw, err)
	}
	if raw, err := marshalFilter(Snapshot{}); raw != nil || err != nil {
		t.Fatalf("marshalFilter of nil: %v %v", raw, err)
	}
}

func TestRebuildFromSnapshotKind(t *testing.T) {
	if historyLostKindOf(RebuildFromSnapshot) != historyRebuildFromSnapshot || RebuildFromSnapshot.String() != "RebuildFromSnapshot" {
		t.Fatalf("RebuildFromSnapshot: kind %v, %q", historyLostKindOf(RebuildFromSnapshot), RebuildFromSnapshot.String())
	}
	if err := RebuildFromSnapshot.Validate(); err != nil {
		t.Fatalf("RebuildFromSnapshot.Validate: %v", err)
	}
	if rebuildFunc(RebuildFromSnapshot) != nil {
		t.Fatal("RebuildFromSnapshot has a user function")
	}
	for m, want := range map[SnapshotMode]string{SnapshotNever: "Never", SnapshotInitial: "Initial", SnapshotWhenNeeded: "WhenNeeded", 9: "SnapshotMode(9)"} {
		if m.String() != want {
			t.Errorf("%d.String() = %q, want %q", m, m.String(), want)
		}
	}
}
