package checkpointer

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// Events receives what the checkpointer does; the root maps it to watchtree.Observer. Methods
// are called on the checkpointer's goroutine and must not block (hand the value to a channel or a
// goroutine of your own). A panic in a method is recovered and logged; it never breaks the
// checkpointer.
type Events interface {
	// HistoryLost: the stream actor reported that its start position is no longer in the oplog;
	// Policy is the OnHistoryLost policy being applied.
	HistoryLost(HistoryLostEvent)
	// GapRecorded: a gap record was durably written (ResumeFromNow, Rebuild).
	GapRecorded(store.Gap)
	// Checkpointed: a checkpoint write succeeded.
	Checkpointed(CheckpointedEvent)
	// CheckpointFailed: a checkpoint write failed; it is retried after RetryIn.
	CheckpointFailed(CheckpointFailedEvent)
	// Fenced: a write was refused because a newer epoch owns the stream. The checkpointer
	// accepts nothing more and escalates a terminal failure.
	Fenced(error)
}

// HistoryLostEvent is reported by Events.HistoryLost.
type HistoryLostEvent struct {
	// Code and Message are the server error the stream actor got (286, 280 or 136).
	Code    int32
	Message string
	// Policy is the OnHistoryLost policy applied ("Fail", "ResumeFromNow", "Rebuild").
	Policy string
	// FromToken and FromTime are the start position that was rejected.
	FromToken bson.Raw
	FromTime  bson.Timestamp
}

// CheckpointedEvent is reported by Events.Checkpointed.
type CheckpointedEvent struct {
	// Checkpoint is the record written (Source "event", "pbrt", "invalidate", or one of the
	// start sources).
	Checkpoint store.Checkpoint
	// Settled is the number of settlements this write covers since the previous successful
	// write (0 for a write of a new start position or of an idle stream's PBRT).
	Settled int
	// LowWaterMark is the highest seq with every lower seq settled when the write was issued.
	LowWaterMark uint64
}

// CheckpointFailedEvent is reported by Events.CheckpointFailed.
type CheckpointFailedEvent struct {
	// Err is the store's error of the failed write.
	Err error
	// Unflushed is the number of settlements not covered by a successful write.
	Unflushed int
	// Attempt counts the consecutive failures, from 1.
	Attempt int
	// RetryIn is the backoff before the next attempt.
	RetryIn time.Duration
}

// NopEvents ignores every event.
type NopEvents struct{}

// HistoryLost ignores the report.
func (NopEvents) HistoryLost(HistoryLostEvent) {}

// GapRecorded ignores the report.
func (NopEvents) GapRecorded(store.Gap) {}

// Checkpointed ignores the report.
func (NopEvents) Checkpointed(CheckpointedEvent) {}

// CheckpointFailed ignores the report.
func (NopEvents) CheckpointFailed(CheckpointFailedEvent) {}

// Fenced ignores the report.
func (NopEvents) Fenced(error) {}
