package policy

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// StartPosition says where a newly spawned stream starts reading; the checkpointer actor applies
// it. Build it with Resume (the zero value), Latest or At. The root package calls it
// watchtree.StartPosition.
//
// Latest and At apply to the first start after Spawn only, until one start of the stream tree
// succeeded (a position was resolved and persisted): every later start of the same tree (a
// supervisor restart, an operator restart, a restart of the checkpointer itself) resumes from the
// checkpoint written since, so a restart never skips events. A saved checkpoint that Latest or At
// discards is logged at WARN.
type StartPosition struct {
	kind StartKind
	at   time.Time
}

// StartKind tells the three kinds of StartPosition apart.
type StartKind uint8

const (
	// StartResume is the kind of Resume.
	StartResume StartKind = iota
	// StartLatest is the kind of Latest.
	StartLatest
	// StartAt is the kind of a position made by At.
	StartAt
)

// Resume (the default) resumes after the saved checkpoint; with no checkpoint it captures the
// current position and persists it before consuming anything. See HistoryLost for a saved
// position that is no longer in the oplog.
var Resume = StartPosition{}

// Latest ignores any saved checkpoint and starts from the current position, persisted before
// anything is consumed.
var Latest = StartPosition{kind: StartLatest}

// At ignores any saved checkpoint and starts at the first event with a cluster time at or after
// t rounded down to the second (startAtOperationTime has second precision, so a few events of
// that second before t may be delivered too). The position is persisted (a checkpoint with no
// token and cluster time t) before anything is consumed. t must be a non-zero time between 1970
// and 2106, and must still be in the oplog, otherwise the HistoryLost policy applies.
func At(t time.Time) StartPosition { return StartPosition{kind: StartAt, at: t} }

// StartKindOf returns the kind of p: StartResume, StartLatest or StartAt.
func StartKindOf(p StartPosition) StartKind { return p.kind }

// StartTime returns the time given to At, and false for Resume and Latest.
func StartTime(p StartPosition) (time.Time, bool) { return p.at, p.kind == StartAt }

// OperationTime returns the startAtOperationTime of an At position: its time rounded down to the
// second, increment 0. It is meaningful only for a valid At position.
func OperationTime(p StartPosition) bson.Timestamp {
	return bson.Timestamp{T: uint32(p.at.Unix())}
}

// String returns "Resume", "Latest" or "At(<RFC 3339 time>)".
func (p StartPosition) String() string {
	switch p.kind {
	case StartResume:
		return "Resume"
	case StartLatest:
		return "Latest"
	case StartAt:
		return "At(" + p.at.UTC().Format(time.RFC3339Nano) + ")"
	}
	return fmt.Sprintf("StartPosition(%d)", p.kind)
}

// Validate checks p: the time of an At position must be non-zero and between 1970 and 2106. The
// error is a *ConfigError on field "StartPosition" and matches ErrInvalidConfig.
func (p StartPosition) Validate() error {
	c := NewErrors("")
	p.validateInto(c, "StartPosition")
	return c.Err()
}

// validateInto adds the broken rule of p, if any, to c under the name field.
func (p StartPosition) validateInto(c *Errors, field string) {
	switch {
	case p.kind != StartAt:
	case p.at.IsZero():
		c.Add(field, "At needs a non-zero time")
	case p.at.Unix() < 0 || p.at.Unix() > math.MaxUint32:
		c.Add(field, "At needs a time between 1970 and 2106, got %s", p.at.UTC().Format(time.RFC3339))
	}
}

// HistoryLost says what a stream does when its saved resume position is no longer in the oplog
// (ChangeStreamHistoryLost 286, ChangeStreamFatalError 280, CappedPositionLost 136); the
// checkpointer actor applies it. Build it with Fail, ResumeFromNow, Rebuild or
// RebuildFromSnapshot. The zero value is the default: Fail, except for a stream with
// Checkpoint.Ephemeral, where it is ResumeFromNow (an in-memory consumer that stopped for good
// would go stale unnoticed; see HistoryLostSet). Fail given explicitly is Fail for every stream.
// The root package calls it watchtree.HistoryLostPolicy. Every choice other than Fail writes a
// durable gap record (stream, from, to, policy, time) to "_wt_gaps", retried until it is
// written, and reports GapRecorded to the Observer: a gap is never silent.
type HistoryLost struct {
	kind    HistoryLostKind
	set     bool // made by Fail, ResumeFromNow, Rebuild or RebuildFromSnapshot, not the zero value
	rebuild func(ctx context.Context) error
}

// HistoryLostKind tells the four kinds of HistoryLost apart.
type HistoryLostKind uint8

const (
	// HistoryFail is the kind of Fail and of the zero value.
	HistoryFail HistoryLostKind = iota
	// HistoryResumeFromNow is the kind of ResumeFromNow.
	HistoryResumeFromNow
	// HistoryRebuild is the kind of a policy made by Rebuild.
	HistoryRebuild
	// HistoryRebuildFromSnapshot is the kind of RebuildFromSnapshot.
	HistoryRebuildFromSnapshot
)

// Fail (the default but for Ephemeral streams) stops the stream terminally with
// watchtree.ErrHistoryLost and reports it. It stays down until an operator acts (for example
// deletes the checkpoint or changes the policy).
var Fail = HistoryLost{set: true}

// ResumeFromNow records the gap and starts from the current position. Use it for rebuildable
// projections (search indexes, caches), and reconcile the gap afterwards.
var ResumeFromNow = HistoryLost{kind: HistoryResumeFromNow, set: true}

// RebuildFromSnapshot records the gap, captures and persists the current position, copies the
// collection's documents again through the stream's handlers (the stream's Snapshot policy:
// Filter, Partitions, BatchSize; resumable like an initial copy), then streams from the captured
// position, so nothing written during the copy is missed. It is the built-in rebuild: the
// handlers see the copied documents as snapshot events (OnSnapshot, else OnChange).
var RebuildFromSnapshot = HistoryLost{kind: HistoryRebuildFromSnapshot, set: true}

// Rebuild records the gap, captures the current operation time T, runs fn (the user's full
// rebuild, for example a re-scan of the collection), then starts at T, so nothing written during
// the rebuild is missed. fn runs on the checkpointer's own I/O goroutine; ctx is cancelled when
// the stream stops. If fn returns an error the start fails and the Restart policy applies (fn
// runs again on the next attempt). fn must not be nil.
func Rebuild(fn func(ctx context.Context) error) HistoryLost {
	return HistoryLost{kind: HistoryRebuild, set: true, rebuild: fn}
}

// HistoryLostKindOf returns the kind of p: HistoryFail, HistoryResumeFromNow, HistoryRebuild or
// HistoryRebuildFromSnapshot.
func HistoryLostKindOf(p HistoryLost) HistoryLostKind { return p.kind }

// HistoryLostSet reports whether p was chosen (Fail, ResumeFromNow, Rebuild, RebuildFromSnapshot)
// rather than left at the zero value, whose meaning depends on the stream (Fail, or
// ResumeFromNow for an Ephemeral stream).
func HistoryLostSet(p HistoryLost) bool { return p.set }

// RebuildFunc returns the function given to Rebuild, and nil for the other kinds.
func RebuildFunc(p HistoryLost) func(ctx context.Context) error { return p.rebuild }

// String returns "Fail", "ResumeFromNow", "Rebuild" or "RebuildFromSnapshot"; gap records store
// it.
func (p HistoryLost) String() string {
	switch p.kind {
	case HistoryFail:
		return "Fail"
	case HistoryResumeFromNow:
		return "ResumeFromNow"
	case HistoryRebuild:
		return "Rebuild"
	case HistoryRebuildFromSnapshot:
		return "RebuildFromSnapshot"
	}
	return fmt.Sprintf("HistoryLostPolicy(%d)", p.kind)
}

// Validate checks p: Rebuild needs a non-nil function. The error is a *ConfigError on field
// "HistoryLostPolicy" and matches ErrInvalidConfig.
func (p HistoryLost) Validate() error {
	c := NewErrors("")
	p.validateInto(c, "HistoryLostPolicy")
	return c.Err()
}

// validateInto adds the broken rule of p, if any, to c under the name field.
func (p HistoryLost) validateInto(c *Errors, field string) {
	if p.kind == HistoryRebuild && p.rebuild == nil {
		c.Add(field, "Rebuild needs a non-nil function")
	}
}
