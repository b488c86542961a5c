package treekit

import "time"

// Gate spaces out a tree actor's reports to its supervisor (counts, checkpoint writes): a
// report per change-stream batch would wake the supervisor once per batch during a catch-up,
// for a status read far less often. The zero Gate lets the first report through; the caller
// keeps what Pass refused and sends it later (on a tick of its own), so nothing is dropped.
type Gate struct {
	last   time.Time // when Pass last returned true, if passed
	passed bool
}

// Pass reports whether a report may go at now: the first one, or every (or more) after the last
// one that passed. It records now when it returns true.
func (g *Gate) Pass(now time.Time, every time.Duration) bool {
	if g.passed && now.Sub(g.last) < every {
		return false
	}
	g.last, g.passed = now, true
	return true
}

// Mark records a report sent at now whatever Pass would say (one that could not wait).
func (g *Gate) Mark(now time.Time) { g.last, g.passed = now, true }
