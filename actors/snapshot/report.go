package snapshot

import (
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/statusx"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
)

// milestone says which observe event a status report is.
type milestone uint8

const (
	// started: a new snapshot read its first range (the plan is saved); an on-demand snapshot
	// started.
	started milestone = iota + 1
	// resumed: a run continued a snapshot an earlier run had begun.
	resumed
	// progress: every ProgressInterval while running (an on-demand snapshot: every chunk).
	progress
	// done: every range is done and the record says so (an on-demand snapshot ended).
	done
	// atRisk: the handoff position is expected to leave the oplog before the snapshot ends
	// (reported when that becomes true, as a SnapshotProgress).
	atRisk
)

// eventOf is the observe event of milestone m with the status st.
func eventOf(m milestone, meta observe.Meta, st *messages.SnapshotStatus) observe.Event {
	s := statusx.SnapshotOf(st)
	switch m {
	case started:
		return observe.SnapshotStarted{Meta: meta, Snapshot: s}
	case resumed:
		return observe.SnapshotResumed{Meta: meta, Snapshot: s}
	case done:
		return observe.SnapshotDone{Meta: meta, Snapshot: s}
	}
	return observe.SnapshotProgress{Meta: meta, Snapshot: s}
}

// announce hands obs the event of milestone m, recovering (and logging) a panic of obs: it
// never breaks the actor.
func announce(obs observe.Observer, log *zap.Logger, m milestone, meta observe.Meta, st *messages.SnapshotStatus) {
	treekit.Report(obs, log, "snapshot", eventOf(m, meta, st))
}
