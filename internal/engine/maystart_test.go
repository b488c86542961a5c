package engine

import (
	"testing"
	"time"
)

// mayStart compares monotonic readings only: a SingleLeader stream's handler call starts
// before the term's validity (the leader's OnValidUntil, a clock.Mono reading), none once it
// passed or the instance stopped leading (0); an AllInstances stream has no check.
func TestMayStartComparesMonotonicReadings(t *testing.T) {
	e := &Entry{spec: &Spec{SingleLeader: true}}
	may := e.mayStart()
	if may(time.Second) {
		t.Fatal("a call may start before any term")
	}
	e.setValidUntil(5 * time.Second)
	if !may(5*time.Second - time.Nanosecond) {
		t.Fatal("no call may start within the term")
	}
	if may(5 * time.Second) {
		t.Fatal("a call may start at the term's end")
	}
	e.setValidUntil(0)
	if may(time.Second) {
		t.Fatal("a call may start after the term ended (not leading)")
	}
	if (&Entry{spec: &Spec{}}).mayStart() != nil {
		t.Fatal("an AllInstances stream has a MayStart")
	}
}
