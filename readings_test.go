package watchtree

import (
	"fmt"
	"testing"
	"time"

	"github.com/watchtree/watchtree/internal/readings"
)

// TestServerReadingsKeepEveryField: every field of internal/readings' Readings, set to a
// distinct value, reaches ServerReadings under the same name: the two print the same with %+v
// (which names every field, nested ones included) only when no field is lost or added on one
// side.
func TestServerReadingsKeepEveryField(t *testing.T) {
	at := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	in := readings.Readings{
		Unreachable: "MongoDB unreachable since 18:00:00 UTC (1s): timeout",
		DeadLetters: map[string]readings.Count{"a": {N: 3, Reading: readings.Reading{At: at, Unknown: "stale"}}},
		Oplog:       readings.Oplog{Oldest: at.Add(-time.Hour), Newest: at, Reading: readings.Reading{At: at.Add(time.Second), Unknown: "denied"}},
	}
	want, got := fmt.Sprintf("%+v", in), fmt.Sprintf("%+v", serverReadings(in))
	if got != want {
		t.Errorf("ServerReadings %s\nwant (internal) %s", got, want)
	}
	if out := serverReadings(readings.Readings{}); out.DeadLetters != nil {
		t.Errorf("no counts became %v, want nil", out.DeadLetters)
	}
}
