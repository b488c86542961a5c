package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyhook"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The tree's plumbing over the policies is unexported: the engine, the root and the actors reach
// it through internal/policyx (set up by init below), so that the exported API is what a user or
// an outside implementer of an actor's Config needs: the types, their fields and constructors,
// Validate and String.

// defaulted is a policy that fills its zero fields in: Retry, Restart, Checkpoint, Lease and
// Snapshot.
type defaulted[P any] interface {
	withDefaults() P
}

// withDefaultsOf returns p with every zero field replaced by the default its field's godoc
// states (Restart.MaxAttempts stays 0, unlimited; Checkpoint.MaxUnflushed follows SaveEvery).
// Set fields are kept as they are, valid or not.
func withDefaultsOf[P defaulted[P]](p P) P { return p.withDefaults() }

// validated is a policy that reports its broken rules into a collector: every policy with a
// Validate method.
type validated interface {
	validateInto(c *configcheck.Errors, field string)
}

// validateIntoOf adds the broken rules of p to c, naming each field field.<Name> (e.g.
// "Retry.MaxAttempts" for field "Retry"), or field itself for a StartPosition or a HistoryLost.
// p.Validate() is validateIntoOf under the root package's type name ("RetryPolicy") on a fresh
// collector.
func validateIntoOf(c *configcheck.Errors, field string, p validated) { p.validateInto(c, field) }

// validate is every policy's Validate: p's broken rules on a fresh collector, each field named
// name.<Name> (name is the root package's type name, "RetryPolicy"), joined, or nil.
func validate(p validated, name string) error {
	c := configcheck.NewErrors("")
	p.validateInto(c, name)
	return c.Err()
}

// backoffPolicy is a policy with a delay formula: Retry or Restart.
type backoffPolicy interface {
	Retry | Restart
	nthDelay(attempt int, rnd func() float64) time.Duration
}

// delayOf returns the delay of the attempt-th attempt (1-based; below 1 counts as 1) of p: for a
// Retry the wait after the attempt-th failed handler call, for a Restart the wait before the
// attempt-th restart, following the formula on the type with zero fields replaced by their
// defaults. rnd returns a uniform float in [0, 1) and is called only when the delay is jittered
// (Retry unless DisableJitter, Restart when Jitter); nil means math/rand/v2.Float64. delayOf
// never overflows: a huge exponent gives MaxDelay.
func delayOf[P backoffPolicy](p P, attempt int, rnd func() float64) time.Duration {
	return p.nthDelay(attempt, rnd)
}

// init hands the plumbing to internal/policyx. The struct type must match policyx's funcs
// field for field (see internal/policyhook).
func init() {
	policyhook.Funcs = struct {
		WithDefaults      func(p any) any
		ValidateInto      func(c *configcheck.Errors, field string, p any)
		ValidateStartInto func(c *configcheck.Errors, startField string, p Checkpoint, start StartPosition)
		Delay             func(p any, attempt int, rnd func() float64) time.Duration
		SnapshotEnabled   func(p Snapshot) bool
		MarshalFilter     func(p Snapshot) (bson.Raw, error)
		StartKindOf       func(p StartPosition) uint8
		StartTime         func(p StartPosition) (time.Time, bool)
		OperationTime     func(p StartPosition) bson.Timestamp
		HistoryLostKindOf func(p HistoryLost) uint8
		HistoryLostSet    func(p HistoryLost) bool
		RebuildFunc       func(p HistoryLost) func(ctx context.Context) error
	}{
		WithDefaults: func(p any) any {
			switch p := p.(type) {
			case Retry:
				return p.withDefaults()
			case Restart:
				return p.withDefaults()
			case Checkpoint:
				return p.withDefaults()
			case Lease:
				return p.withDefaults()
			case Snapshot:
				return p.withDefaults()
			}
			panic(fmt.Sprintf("policy: %T has no defaults", p))
		},
		ValidateInto: func(c *configcheck.Errors, field string, p any) {
			p.(validated).validateInto(c, field)
		},
		ValidateStartInto: validateStartInto,
		Delay: func(p any, attempt int, rnd func() float64) time.Duration {
			switch p := p.(type) {
			case Retry:
				return p.nthDelay(attempt, rnd)
			case Restart:
				return p.nthDelay(attempt, rnd)
			}
			panic(fmt.Sprintf("policy: %T has no delay formula", p))
		},
		SnapshotEnabled:   snapshotEnabled,
		MarshalFilter:     marshalFilter,
		StartKindOf:       func(p StartPosition) uint8 { return uint8(p.kind) },
		StartTime:         startTime,
		OperationTime:     operationTime,
		HistoryLostKindOf: func(p HistoryLost) uint8 { return uint8(p.kind) },
		HistoryLostSet:    historyLostSet,
		RebuildFunc:       rebuildFunc,
	}
}
