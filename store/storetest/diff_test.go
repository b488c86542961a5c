package storetest

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// TestDiffRecordNamesEveryField checks that diffRecord compares every field of the records it
// serves (a record whose every field differs is reported field by field), that equal records and
// nil-versus-empty raw BSON have no diff, and that skipped fields are left out.
func TestDiffRecordNamesEveryField(t *testing.T) {
	cp := store.Checkpoint{Stream: "s", Instance: "i", Token: token("a"), Epoch: 2, Settled: 3, UpdatedAt: baseTime, Rewind: true}
	if d := diffCheckpoint(cp, cp); d != "" {
		t.Errorf("diffCheckpoint(x, x) = %q, want no diff", d)
	}
	if d := diffCheckpoint(store.Checkpoint{Rewind: true, Token: bson.Raw{}}, store.Checkpoint{}); d != "" {
		t.Errorf("diffCheckpoint with only Rewind and nil/empty Token differing = %q, want no diff (Rewind is skipped)", d)
	}
	got := diffCheckpoint(cp, store.Checkpoint{})
	for _, f := range []string{"Stream:", "Instance:", "Token:", "Epoch:", "Settled:", "UpdatedAt:"} {
		if !strings.Contains(got, f) {
			t.Errorf("diffCheckpoint(full, zero) = %q, want it to name %s", got, f)
		}
	}
	if strings.Contains(got, "Rewind") {
		t.Errorf("diffCheckpoint(full, zero) = %q, want Rewind skipped", got)
	}
	dl := store.DeadLetter{ID: "x", EventOmitted: true, Attempts: 4, ReplayCount: 1, CreatedAt: baseTime}
	got = diffRecord(dl, store.DeadLetter{})
	for _, f := range []string{"ID:", "EventOmitted:", "Attempts:", "ReplayCount:", "CreatedAt:"} {
		if !strings.Contains(got, f) {
			t.Errorf("diffRecord(dead letter, zero) = %q, want it to name %s", got, f)
		}
	}
	g := store.Gap{ID: "g", FromTime: bson.Timestamp{T: 1}, At: baseTime}
	if got := diffRecord(g, store.Gap{}); !strings.Contains(got, "FromTime:") || !strings.Contains(got, "At:") {
		t.Errorf("diffRecord(gap, zero) = %q, want FromTime and At named", got)
	}
}
