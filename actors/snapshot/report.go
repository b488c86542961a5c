package snapshot

import (
	"go.uber.org/zap"

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

// StatusOf converts the snapshot status the actors send the supervisor (StatusReply.snapshot,
// StatusReply.on_demand) to the shape the Observer events and watchtree.StreamStatus carry.
// A nil st gives the zero status.
func StatusOf(st *messages.SnapshotStatus) observe.SnapshotStatus {
	p := observe.SnapshotStatus{ID: st.GetSnapshotId(), Reason: st.GetReason(), Running: st.GetRunning(), Done: st.GetDone(),
		Resumed: st.GetResumed(), RangesDone: int(st.GetRangesDone()), RangesTotal: int(st.GetRangesTotal()),
		Documents: st.GetDocuments(), EstimatedTotal: st.GetEstimatedTotal(), DeadLettered: st.GetDeadLettered(),
		Rate: st.GetRate(), AtRisk: st.GetAtRisk(), Warning: st.GetWarning(), Error: st.GetError(),
		Phase: st.GetPhase(), ChunksDone: int(st.GetChunksDone()), Dropped: st.GetDropped()}
	if st.GetEta() != nil {
		p.ETA = st.GetEta().AsDuration()
	}
	if st.GetOplogWindow() != nil {
		p.OplogWindow = st.GetOplogWindow().AsDuration()
	}
	if st.GetStartedAt() != nil {
		p.StartedAt = st.GetStartedAt().AsTime()
	}
	if st.GetDoneAt() != nil {
		p.DoneAt = st.GetDoneAt().AsTime()
	}
	return p
}

// eventOf is the observe event of milestone m with the status st.
func eventOf(m milestone, meta observe.Meta, st *messages.SnapshotStatus) observe.Event {
	s := StatusOf(st)
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
	defer func() {
		if rec := recover(); rec != nil {
			log.Error("snapshot Observer panicked", zap.Any("panic", rec))
		}
	}()
	obs.OnEvent(eventOf(m, meta, st))
}
