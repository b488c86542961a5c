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

// Resume and Latest are watchtree.Resume and Latest.
var (
	Resume = StartPosition{}
	Latest = StartPosition{kind: startLatest}
)

// At is watchtree.At.
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

// HistoryLost is the value inside watchtree.HistoryLostPolicy, which documents it and its
// default (see historyLostSet).
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

// Fail, ResumeFromNow and RebuildFromSnapshot are watchtree's, which document them.
var (
	Fail                = HistoryLost{set: true}
	ResumeFromNow       = HistoryLost{kind: historyResumeFromNow, set: true}
	RebuildFromSnapshot = HistoryLost{kind: historyRebuildFromSnapshot, set: true}
)

// Rebuild is watchtree.Rebuild.
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

// String returns "Fail", "ResumeFromNow", "Rebuild" or "RebuildFromSnapshot"; gap records store
// it.
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
