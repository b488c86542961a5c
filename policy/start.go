package policy

import (
	"context"
	"fmt"
	"github.com/watchtree/watchtree/internal/configcheck"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// StartPosition is the value inside watchtree.StartPosition, which documents it.
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

// Resume and Latest are watchtree.Resume and Latest.
var (
	Resume = StartPosition{}
	Latest = StartPosition{kind: StartLatest}
)

// At is watchtree.At.
func At(t time.Time) StartPosition { return StartPosition{kind: StartAt, at: t} }

// startKindOf returns the kind of p: StartResume, StartLatest or StartAt.
func startKindOf(p StartPosition) StartKind { return p.kind }

// startTime returns the time given to At, and false for Resume and Latest.
func startTime(p StartPosition) (time.Time, bool) { return p.at, p.kind == StartAt }

// operationTime returns the startAtOperationTime of an At position: its time rounded down to the
// second, increment 0. It is meaningful only for a valid At position.
func operationTime(p StartPosition) bson.Timestamp {
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
// error is a *configerr.Error on field "StartPosition" and matches configerr.ErrInvalid.
func (p StartPosition) Validate() error {
	return validate(p, "StartPosition")
}

// validateInto adds the broken rule of p, if any, to c under the name field.
func (p StartPosition) validateInto(c *configcheck.Errors, field string) {
	switch {
	case p.kind != StartAt:
	case p.at.IsZero():
		c.Add(field, "At needs a non-zero time")
	case p.at.Unix() < 0 || p.at.Unix() > math.MaxUint32:
		c.Add(field, "At needs a time between 1970 and 2106, got %s", p.at.UTC().Format(time.RFC3339))
	}
}

// HistoryLost is the value inside watchtree.HistoryLostPolicy, which documents it and its
// default (see historyLostSet).
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

// Fail, ResumeFromNow and RebuildFromSnapshot are watchtree's, which document them.
var (
	Fail                = HistoryLost{set: true}
	ResumeFromNow       = HistoryLost{kind: HistoryResumeFromNow, set: true}
	RebuildFromSnapshot = HistoryLost{kind: HistoryRebuildFromSnapshot, set: true}
)

// Rebuild is watchtree.Rebuild.
func Rebuild(fn func(ctx context.Context) error) HistoryLost {
	return HistoryLost{kind: HistoryRebuild, set: true, rebuild: fn}
}

// historyLostKindOf returns the kind of p: HistoryFail, HistoryResumeFromNow, HistoryRebuild or
// HistoryRebuildFromSnapshot.
func historyLostKindOf(p HistoryLost) HistoryLostKind { return p.kind }

// historyLostSet reports whether p was chosen (Fail, ResumeFromNow, Rebuild, RebuildFromSnapshot)
// rather than left at the zero value, whose meaning depends on the stream (Fail, or
// ResumeFromNow for an Ephemeral stream).
func historyLostSet(p HistoryLost) bool { return p.set }

// rebuildFunc returns the function given to Rebuild, and nil for the other kinds.
func rebuildFunc(p HistoryLost) func(ctx context.Context) error { return p.rebuild }

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

// Validate checks p: Rebuild needs a non-nil function. The error is a *configerr.Error on field
// "HistoryLostPolicy" and matches configerr.ErrInvalid.
func (p HistoryLost) Validate() error {
	return validate(p, "HistoryLostPolicy")
}

// validateInto adds the broken rule of p, if any, to c under the name field.
func (p HistoryLost) validateInto(c *configcheck.Errors, field string) {
	if p.kind == HistoryRebuild && p.rebuild == nil {
		c.Add(field, "Rebuild needs a non-nil function")
	}
}
