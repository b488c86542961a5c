package store

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Gap policies: the values of Gap.Policy.
const (
	// GapResumeFromNow: processing restarted at the current position; the lost history was
	// skipped.
	GapResumeFromNow = "resumeFromNow"
	// GapRebuild: the user's rebuild function ran, and processing restarted at the operation
	// time captured before it.
	GapRebuild = "rebuild"
	// GapRebuildFromSnapshot: processing restarted at the position captured before a snapshot
	// that copied the collection again through the handlers (RebuildFromSnapshot).
	GapRebuildFromSnapshot = "rebuildFromSnapshot"
)

// Gap is the durable record of history skipped on purpose (OnHistoryLost other than Fail). A
// gap is never silent: the checkpointer writes one before it resumes past lost history.
type Gap struct {
	// ID identifies the record (unique; the writer chooses it, e.g. stream + "/" + instance + "/" + time). A
	// second RecordGap with the same ID overwrites the first, so a retried write never duplicates.
	ID string
	// Stream is the stream name, Instance the instance name of an AllInstances stream (empty
	// for the shared scope); gaps are listed per Scope.
	Stream   string
	Instance string
	// FromToken and FromTime are the last durable position before the gap (either may be empty
	// when the stream never had one).
	FromToken bson.Raw
	FromTime  bson.Timestamp
	// ToToken and ToTime are where processing restarts.
	ToToken bson.Raw
	ToTime  bson.Timestamp
	// Policy is the OnHistoryLost policy applied: GapResumeFromNow, GapRebuild or
	// GapRebuildFromSnapshot.
	Policy string
	// Reason is the server error that lost the history (code and message).
	Reason string
	// At is when the gap was recorded (the writer's clock). Gaps of a stream are listed in
	// ascending At order (ties by ID).
	At time.Time
}

// Scope returns the scope of the record: its Stream and Instance.
func (g Gap) Scope() Scope { return Scope{Stream: g.Stream, Instance: g.Instance} }

// Clone returns a deep copy of g.
func (g Gap) Clone() Gap {
	g.FromToken = cloneRaw(g.FromToken)
	g.ToToken = cloneRaw(g.ToToken)
	return g
}

// GapStore records history skipped on purpose (watchtree.Config.Gaps): the checkpointer writes a
// gap before it resumes past lost history (OnHistoryLost ResumeFromNow, Rebuild or
// RebuildFromSnapshot). store/memstore and store/mongostore implement it, and
// store/storetest.TestGapStore is its contract.
//
// Every method honours ctx: a done context fails the call with an error matching ctx.Err() and
// changes nothing.
type GapStore interface {
	// RecordGap upserts g by g.ID, so a retried write never duplicates. A nil error means the
	// record is durable; on an error the stream does not resume past the gap, and the write is
	// retried.
	RecordGap(ctx context.Context, g Gap) error
	// ListGaps returns the gaps of scope in ascending At order (ties by ID); empty, not an
	// error, when there are none.
	ListGaps(ctx context.Context, scope Scope) ([]Gap, error)
}
