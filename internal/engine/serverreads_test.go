package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/clock"
)

// TestReadingsMarkWhatIsNotCurrent: the readings say, in the one wording, when MongoDB does not
// answer (a round that failed as a timeout, or one unanswered for 1s), keep the last known
// values with their age, and tell a read's own error (an oplog the client may not read) from an
// outage. The cache is driven by hand, on a fake clock.
func TestReadingsMarkWhatIsNotCurrent(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	rt := &Runtime{clk: clk, streams: map[string]*Entry{"pay": {name: "pay"}}}
	s := &serverReads{rt: rt, counts: map[string]countState{}}
	t0 := clk.Now()
	s.counts["pay"] = countState{n: 3, at: t0}
	s.oplog = OplogReading{Oldest: t0.Add(-time.Hour), Newest: t0, Reading: Reading{At: t0}}
	s.lastRound = t0

	if rd := s.snapshot(); rd.Unreachable != "" || rd.DeadLetters["pay"].Unknown != "" || rd.DeadLetters["pay"].N != 3 || rd.Oplog.Unknown != "" {
		t.Fatalf("current readings: %+v", rd)
	}
	// A round begins and goes unanswered: within 1s the values are only late, after it MongoDB
	// is unreachable.
	clk.Advance(3 * time.Second)
	s.pending = clk.Now()
	clk.Advance(200 * time.Millisecond)
	rd := s.snapshot()
	if rd.Unreachable != "" || !strings.HasPrefix(rd.DeadLetters["pay"].Unknown, "MongoDB has not answered for 200ms") {
		t.Errorf("after 200ms without an answer: %+v", rd)
	}
	clk.Advance(time.Second)
	rd = s.snapshot()
	const want = "MongoDB unreachable since 10:00:03 UTC (1s): no answer for 1.2s"
	if rd.Unreachable != want {
		t.Errorf("Unreachable = %q, want %q", rd.Unreachable, want)
	}
	if c := rd.DeadLetters["pay"]; c.N != 3 || !c.At.Equal(t0) || c.Unknown != want+" (last read 4s ago)" {
		t.Errorf("count during the outage: %+v", c)
	}
	// The round fails as a timeout: the cause is the driver's, without its topology dump.
	s.pending = time.Time{}
	s.failedSince = t0.Add(3 * time.Second)
	s.failure = errors.Join(errors.New("server selection error: context deadline exceeded, current topology: { huge }"), context.DeadlineExceeded)
	s.counts["pay"] = countState{n: 3, at: t0, err: s.failure}
	s.oplogErr = s.failure
	rd = s.snapshot()
	if strings.Contains(rd.Unreachable, "topology") || !strings.HasPrefix(rd.Unreachable, "MongoDB unreachable since 10:00:03 UTC") ||
		!strings.HasPrefix(rd.Oplog.Unknown, rd.Unreachable) || !strings.HasPrefix(rd.DeadLetters["pay"].Unknown, rd.Unreachable) {
		t.Errorf("after a failed round: %+v", rd)
	}
	// MongoDB answers again, but the oplog is not readable: that is the read's own error.
	s.failedSince, s.failure = time.Time{}, nil
	s.counts["pay"] = countState{n: 4, at: clk.Now()}
	s.oplogErr = errors.New("not authorized on local")
	rd = s.snapshot()
	if rd.Unreachable != "" || rd.DeadLetters["pay"].Unknown != "" || rd.DeadLetters["pay"].N != 4 ||
		!strings.HasPrefix(rd.Oplog.Unknown, "oplog not readable: not authorized on local (last read ") {
		t.Errorf("oplog not readable: %+v", rd)
	}
}
