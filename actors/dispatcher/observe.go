package dispatcher

import (
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/observe"
)

// outcomeCounts are cumulative outcome counters of one dispatcher instance, reported to the
// supervisor as SettlementCounts deltas.
type outcomeCounts struct {
	Settled      uint64 // every settled event: the sum of the five outcomes below
	Handled      uint64 // a handler returned nil
	Filtered     uint64 // Stream.Filter rejected the event
	Unhandled    uint64 // no handler for the event's operation type
	Skipped      uint64 // a handler returned watchtree.Skip
	DeadLettered uint64 // attempts ran out or the error was permanent; the record is written (or Dropped)
	Dropped      uint64 // of DeadLettered: dead letters disabled, no record written
}

// report hands ev to the Observer with the stream and the clock's time in its Meta
// (build fills the rest), recovering and logging a panic of the Observer: it never breaks a lane.
func (sh *laneShared) report(build func(m observe.Meta) observe.Event) {
	treekit.Report(sh.obs, sh.log, "dispatcher", build(observe.Meta{Stream: sh.stream, Time: sh.clk.Now()}))
}
