package watchtree

import (
	"time"

	"github.com/watchtree/watchtree/actors/snapshot"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/policy"
)

// SnapshotPolicy configures the copy of a collection's existing documents through the stream's
// handlers (the initial load, and the rebuild of RebuildFromSnapshot). It is policy.Snapshot:
// see there for the fields, their defaults (Mode SnapshotNever, 4 partitions, chunks of 1000
// documents) and the guarantees.
type SnapshotPolicy = policy.Snapshot

// SnapshotMode says when a stream copies the existing documents. It is policy.SnapshotMode.
type SnapshotMode = policy.SnapshotMode

// The snapshot modes; see policy.SnapshotMode.
const (
	SnapshotNever      = policy.SnapshotNever
	SnapshotInitial    = policy.SnapshotInitial
	SnapshotWhenNeeded = policy.SnapshotWhenNeeded
)

// RebuildFromSnapshot records the gap, captures and persists the current position, copies the
// collection again through the handlers (Stream.Snapshot's Filter, Partitions and BatchSize;
// resumable), then streams from the captured position. See policy.RebuildFromSnapshot.
var RebuildFromSnapshot = policy.RebuildFromSnapshot

// snapshotEvents maps the snapshot actor's milestones to Observer events.
type snapshotEvents struct{ e *streamEntry }

func (s snapshotEvents) Report(kind snapshot.Kind, st *messages.SnapshotStatus) {
	p := snapshotProgressOf(st)
	m := Meta{Stream: s.e.name, Time: s.e.rt.clk.Now()}
	switch kind {
	case snapshot.KindStarted:
		s.e.rt.obs.OnEvent(SnapshotStarted{Meta: m, Snapshot: p})
	case snapshot.KindResumed:
		s.e.rt.obs.OnEvent(SnapshotResumed{Meta: m, Snapshot: p})
	case snapshot.KindProgress, snapshot.KindAtRisk:
		s.e.rt.obs.OnEvent(SnapshotProgress{Meta: m, Snapshot: p})
	case snapshot.KindDone:
		s.e.rt.obs.OnEvent(SnapshotDone{Meta: m, Snapshot: p})
	}
}

// SnapshotStatus is the progress of a stream's snapshot (StreamStatus.Snapshot and the
// snapshot Observer events).
type SnapshotStatus struct {
	// ID identifies the snapshot; it is part of every snapshot event's ID.
	ID string
	// Reason is "initial" (the first start), "rebuild" (RebuildFromSnapshot) or "on-demand"
	// (Handle.Snapshot).
	Reason string
	// Phase is set for an on-demand snapshot: "running", "done", "failed" (Error says why) or
	// "abandoned" (the stream restarted or stopped; Error says why).
	Phase string
	// ChunksDone counts the chunks of an on-demand snapshot released to the handlers; Dropped
	// the rows left out because a live event changed their document inside the chunk's window.
	ChunksDone int
	Dropped    uint64
	// Running is true while a run reads documents; Done once every range is done.
	Running, Done bool
	// Resumed is true when the current run continued a snapshot an earlier run had begun.
	Resumed bool
	// RangesDone of RangesTotal _id ranges are finished.
	RangesDone, RangesTotal int
	// Documents is the number of documents handled (settled) so far, over every run;
	// EstimatedTotal the number of matching documents counted when the ranges were planned.
	Documents, EstimatedTotal uint64
	// DeadLettered counts the snapshot documents of this run that went to the dead letters.
	DeadLettered uint64
	// Rate is documents per second in this run; ETA the time left at that rate (0: unknown).
	Rate float64
	ETA  time.Duration
	// StartedAt is when the snapshot was created; DoneAt when it finished.
	StartedAt, DoneAt time.Time
	// OplogWindow is the time the oplog spans (0: it cannot be read). AtRisk is true when, at
	// the current rate, the snapshot would end after its handoff position left the oplog;
	// Warning then says so.
	OplogWindow time.Duration
	AtRisk      bool
	Warning     string
	// Error is the error that ended the latest run, if it failed.
	Error string
}

func snapshotProgressOf(st *messages.SnapshotStatus) SnapshotStatus {
	p := SnapshotStatus{ID: st.GetSnapshotId(), Reason: st.GetReason(), Running: st.GetRunning(), Done: st.GetDone(),
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
