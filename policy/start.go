package policy

import (
	"context"
	"fmt"
	"github.com/watchtree/watchtree/internal/configcheck"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// StartPosition (watchtree.StartPosition, Stream.StartPosition, checkpointer.Config.StartPosition) says
// where a newly spawned stream starts reading; the checkpointer actor applies it. Build it with
// Resume (the zero value), Latest or At.
//
// Latest and At apply to the first start after Spawn only, until one start of the stream tree
// succeeded (a position was resolved and persisted): every later start of the same tree (a
// supervisor restart, an operator restart, a restart of the checkpointer itself) resumes from the
// checkpoint written since, so a restart never skips events. A saved checkpoint that Latest or At
// discards is logged at WARN.
type StartPosition struct {
	kind startKind
	at   time.Time
}

// startKind tells the three kinds of StartPosition apart.
type startKind uint8

const (
	// startResume is the kind of Resume.
	startResume startKind = iota
	// startLatest is the kind of Latest.
	startLatest
	// startAt is the kind of a position made by At.
	startAt
)

var (
	// Resume (the default) resumes after the saved checkpoint; with no checkpoint it captures
	// the current position and persists it before consuming anything. See HistoryLost for a
	// saved position that is no longer in the oplog.
	Resume = StartPosition{}
	// Latest ignores any saved checkpoint and starts from the current position, persisted
	// before anything is consumed.
	Latest = StartPosition{kind: startLatest}
)

// At ignores any saved checkpoint and starts at the first event with a cluster time at or after
// t rounded down to the second (startAtOperationTime has second precision, so a few events of
// that second before t may be delivered too). The position is persisted (a checkpoint with no
// token and cluster time t) before anything is consumed. t must be a non-zero time between 1970
// and 2106 and still in the oplog (otherwise the stream's HistoryLost applies); Validate reports
// a time out of range.
func At(t time.Time) StartPosition { return StartPosition{kind: startAt, at: t} }

// startKindOf returns the kind of p: startResume, startLatest or startAt.
func startKindOf(p StartPosition) startKind { return p.kind }

// startTime returns the time given to At, and false for Resume and Latest.
func startTime(p StartPosition) (time.Time, bool) { return p.at, p.kind == startAt }

// operationTime returns the startAtOperationTime of an At position: its time rounded down to the
// second, increment 0. It is meaningful only for a valid At position.
func operationTime(p StartPosition) bson.Timestamp {
	return bson.Timestamp{T: uint32(p.at.Unix())}
}

// String returns "Resume", "Latest" or "At(<RFC 3339 time>)".
func (p StartPosition) String() string {
	switch p.kind {
	case startResume:
		return "Resume"
	case startLatest:
		return "Latest"
	case startAt:
		return "At(" + p.at.UTC().Format(time.RFC3339Nano) + ")"
	}
	return fmt.Sprintf("StartPosition(%d)", p.kind)
}

// Validate checks p: the time of an At position must be non-zero and between 1970 and 2106. The
// error is a *configerr.Error on field "StartPosition" and matches configerr.ErrInvalid.
func (p StartPosition) Validate() error {
	return validate(p, "StartPosition")
}

// validateInto adds the broken rule of p, if any, to c under the name field.
func (p StartPosition) validateInto(c *configcheck.Errors, field string) {
	switch {
	case p.kind != startAt:
	case p.at.IsZero():
		c.Add(field, "At needs a non-zero time")
	case p.at.Unix() < 0 || p.at.Unix() > math.MaxUint32:
		c.Add(field, "At needs a time between 1970 and 2106, got %s", p.at.UTC().Format(time.RFC3339))
	}
}

// HistoryLost (watchtree.HistoryLostPolicy, Stream.OnHistoryLost, checkpointer.Config.OnHistoryLost)
// says what a stream does when its saved resume position is no longer in the oplog
// (ChangeStreamHistoryLost 286, ChangeStreamFatalError 280, CappedPositionLost 136); the
// checkpointer actor applies it. Build it with Fail, ResumeFromNow, Rebuild or
// RebuildFromSnapshot. The zero value is the default: Fail, except for a stream with
// Checkpoint.Ephemeral, where it is ResumeFromNow (an in-memory consumer that stopped for good
// would go stale unnoticed); Fail given explicitly is Fail for every stream. Every choice other
// than Fail writes a durable gap record (stream, from, to, policy, time) to "_wt_gaps", retried
// until it is written, and reports GapRecorded to the Observer: a gap is never silent.
type HistoryLost struct {
	kind    historyLostKind
	set     bool // made by Fail, ResumeFromNow, Rebuild or RebuildFromSnapshot, not the zero value
	rebuild func(ctx context.Context) error
}

// historyLostKind tells the four kinds of HistoryLost apart.
type historyLostKind uint8

const (
	// historyFail is the kind of Fail and of the zero value.
	historyFail historyLostKind = iota
	// historyResumeFromNow is the kind of ResumeFromNow.
	historyResumeFromNow
	// historyRebuild is the kind of a policy made by Rebuild.
	historyRebuild
	// historyRebuildFromSnapshot is the kind of RebuildFromSnapshot.
	historyRebuildFromSnapshot
)

var (
	// Fail (the default, except for Ephemeral streams) stops the stream terminally with
	// ErrHistoryLost and reports it; it stays down until an operator acts (for example deletes
	// the checkpoint or changes the policy). Set explicitly, it applies to an Ephemeral stream
	// too.
	Fail = HistoryLost{set: true}
	// ResumeFromNow records the gap (a gap record, HistoryLost and GapRecorded events) and
	// starts from the current position. It is the default of an Ephemeral stream. Use it for
	// rebuildable projections (search indexes, caches), and reconcile the gap afterwards.
	ResumeFromNow = HistoryLost{kind: historyResumeFromNow, set: true}
	// RebuildFromSnapshot records the gap, captures and persists the current position, copies
	// the collection's documents again through the stream's handlers (the stream's Snapshot
	// Filter, Partitions and BatchSize; resumable like an initial copy), then streams from the
	// captured position, so nothing written during the copy is missed. It needs Snapshot.Mode
	// SnapshotWhenNeeded, whose default it is.
	RebuildFromSnapshot = HistoryLost{kind: historyRebuildFromSnapshot, set: true}
)

// Rebuild records the gap, captures the current operation time T, runs fn (the user's full
// rebuild, for example a re-scan of the collection), then starts at T, so nothing written during
// the rebuild is missed. fn runs on the checkpointer's own I/O goroutine; ctx is cancelled when
// the stream stops. fn must not be nil (Validate reports it); if it fails, the start fails and the
// Restart policy applies (fn runs again on the next attempt).
func Rebuild(fn func(ctx context.Context) error) HistoryLost {
	return HistoryLost{kind: historyRebuild, set: true, rebuild: fn}
}

// historyLostKindOf returns the kind of p: historyFail, historyResumeFromNow, historyRebuild or
// historyRebuildFromSnapshot.
func historyLostKindOf(p HistoryLost) historyLostKind { return p.kind }

// historyLostSet reports whether p was chosen (Fail, ResumeFromNow, Rebuild, RebuildFromSnapshot)
// rather than left at the zero value, whose meaning depends on the stream (Fail, or
// ResumeFromNow for an Ephemeral stream).
func historyLostSet(p HistoryLost) bool { return p.set }

// rebuildFunc returns the function given to Rebuild, and nil for the other kinds.
func rebuildFunc(p HistoryLost) func(ctx context.Context) error { return p.rebuild }

// String returns "Fail", "ResumeFromNow", "Rebuild" or "RebuildFromSnapshot", the names gap
// records and the Observer's HistoryLost and GapRecorded events carry.
func (p HistoryLost) String() string {
	switch p.kind {
	case historyFail:
		return "Fail"
	case historyResumeFromNow:
		return "ResumeFromNow"
	case historyRebuild:
		return "Rebuild"
	case historyRebuildFromSnapshot:
		return "RebuildFromSnapshot"
	}
	return fmt.Sprintf("HistoryLostPolicy(%d)", p.kind)
}

// Validate checks p: Rebuild needs a non-nil function. The error is a *configerr.Error on field
// "HistoryLostPolicy" and matches configerr.ErrInvalid.
func (p HistoryLost) Validate() error {
	return validate(p, "HistoryLostPolicy")
}

// validateInto adds the broken rule of p, if any, to c under the name field.
func (p HistoryLost) validateInto(c *configcheck.Errors, field string) {
	if p.kind == historyRebuild && p.rebuild == nil {
		c.Add(field, "Rebuild needs a non-nil function")
	}
}
