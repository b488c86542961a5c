// Package policyx is the tree's plumbing over package policy's types: the defaults, the
// validators into a configcheck.Errors collector, the backoff formula and the readers of the
// opaque StartPosition and HistoryLost. The engine, the root and the actors call it; it is
// internal so that policy's exported API stays what a user or an outside implementer of an
// actor's Config needs (the types, their fields and constructors, Validate and String). The
// functions are policy's own, handed over through internal/policyhook.
package policyx

import (
	"context"
	"time"

	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyhook"
	"github.com/watchtree/watchtree/policy"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// funcs is the type of policyhook.Funcs: it must match the struct literal in policy's init field
// for field, or the assertion below panics when the package is initialized.
type funcs = struct {
	WithDefaults      func(p any) any
	ValidateInto      func(c *configcheck.Errors, field string, p any)
	ValidateStartInto func(c *configcheck.Errors, startField string, p policy.Checkpoint, start policy.StartPosition)
	Delay             func(p any, attempt int, rnd func() float64) time.Duration
	SnapshotEnabled   func(p policy.Snapshot) bool
	MarshalFilter     func(p policy.Snapshot) (bson.Raw, error)
	StartKindOf       func(p policy.StartPosition) uint8
	StartTime         func(p policy.StartPosition) (time.Time, bool)
	OperationTime     func(p policy.StartPosition) bson.Timestamp
	HistoryLostKindOf func(p policy.HistoryLost) uint8
	HistoryLostSet    func(p policy.HistoryLost) bool
	RebuildFunc       func(p policy.HistoryLost) func(ctx context.Context) error
}

var fn = policyhook.Funcs.(funcs)

// Defaulted is a policy with defaults.
type Defaulted interface {
	policy.Retry | policy.Restart | policy.Checkpoint | policy.Lease | policy.Snapshot
}

// Validated is a policy with a Validate method.
type Validated interface {
	policy.Retry | policy.Restart | policy.Checkpoint | policy.Lease | policy.Snapshot |
		policy.StartPosition | policy.HistoryLost
}

// WithDefaults returns p with every zero field replaced by the default its field's godoc states
// (Restart.MaxAttempts stays 0, unlimited; Checkpoint.MaxUnflushed follows SaveEvery). Set fields
// are kept as they are, valid or not.
func WithDefaults[P Defaulted](p P) P { return fn.WithDefaults(p).(P) }

// ValidateInto adds the broken rules of p to c, naming each field field.<Name> (e.g.
// "Retry.MaxAttempts" for field "Retry"), or field itself for a StartPosition or a HistoryLost.
// p.Validate() is ValidateInto under the root package's type name ("RetryPolicy") on a fresh
// collector.
func ValidateInto[P Validated](c *configcheck.Errors, field string, p P) {
	fn.ValidateInto(c, field, p)
}

// ValidateStartInto adds to c the rule that ties a Checkpoint to its StartPosition: an Ephemeral
// stream starts at the current position on every start, so start (field startField) must be
// Resume or Latest.
func ValidateStartInto(c *configcheck.Errors, startField string, p policy.Checkpoint, start policy.StartPosition) {
	fn.ValidateStartInto(c, startField, p, start)
}

// Delay returns the delay of the attempt-th attempt (1-based; below 1 counts as 1) of p: for a
// Retry the wait after the attempt-th failed handler call, for a Restart the wait before the
// attempt-th restart, following the formula on the type with zero fields replaced by their
// defaults. rnd returns a uniform float in [0, 1) and is called only when the delay is jittered
// (Retry unless DisableJitter, Restart when Jitter); nil means math/rand/v2.Float64. Delay never
// overflows: a huge exponent gives MaxDelay.
func Delay[P policy.Retry | policy.Restart](p P, attempt int, rnd func() float64) time.Duration {
	return fn.Delay(p, attempt, rnd)
}

// SnapshotEnabled reports whether p copies the existing documents on the first start (Mode
// SnapshotInitial or SnapshotWhenNeeded).
func SnapshotEnabled(p policy.Snapshot) bool { return fn.SnapshotEnabled(p) }

// MarshalFilter returns p.Filter as a BSON document (a copy of a bson.Raw); nil when Filter is
// nil. The error says why Filter is not a document; Validate reports it on SnapshotPolicy.Filter.
func MarshalFilter(p policy.Snapshot) (bson.Raw, error) { return fn.MarshalFilter(p) }

// StartKind tells the three kinds of StartPosition apart. The values are policy's own (its
// unexported startKind), in the same order.
type StartKind uint8

const (
	// StartResume is the kind of Resume.
	StartResume StartKind = iota
	// StartLatest is the kind of Latest.
	StartLatest
	// StartAt is the kind of a position made by At.
	StartAt
)

// StartKindOf returns the kind of p: StartResume, StartLatest or StartAt.
func StartKindOf(p policy.StartPosition) StartKind { return StartKind(fn.StartKindOf(p)) }

// StartTime returns the time given to At, and false for Resume and Latest.
func StartTime(p policy.StartPosition) (time.Time, bool) { return fn.StartTime(p) }

// OperationTime returns the startAtOperationTime of an At position: its time rounded down to the
// second, increment 0. It is meaningful only for a valid At position.
func OperationTime(p policy.StartPosition) bson.Timestamp { return fn.OperationTime(p) }

// HistoryLostKind tells the four kinds of HistoryLost apart. The values are policy's own (its
// unexported historyLostKind), in the same order.
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

// HistoryLostKindOf returns the kind of p: HistoryFail, HistoryResumeFromNow, HistoryRebuild or
// HistoryRebuildFromSnapshot.
func HistoryLostKindOf(p policy.HistoryLost) HistoryLostKind {
	return HistoryLostKind(fn.HistoryLostKindOf(p))
}

// HistoryLostSet reports whether p was chosen (Fail, ResumeFromNow, Rebuild, RebuildFromSnapshot)
// rather than left at the zero value, whose meaning depends on the stream (Fail, or
// ResumeFromNow for an Ephemeral stream).
func HistoryLostSet(p policy.HistoryLost) bool { return fn.HistoryLostSet(p) }

// RebuildFunc returns the function given to Rebuild, and nil for the other kinds.
func RebuildFunc(p policy.HistoryLost) func(ctx context.Context) error { return fn.RebuildFunc(p) }
