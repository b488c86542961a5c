package watchtree

import (
	"github.com/watchtree/watchtree/internal/configcheck"
	"time"

	"github.com/watchtree/watchtree/internal/engine"
)

// The TxBatchPolicy bounds.
const (
	defaultTxBatchBytes    = 1 << 20
	defaultTxBatchDuration = time.Second
	maxTxBatchEvents       = 10_000
)

// TxBatchPolicy lets several consecutive events of one lane of a Transactional stream share a
// transaction: fewer commits, each with its majority write, for the same handlers. A batch takes
// the events already queued on the lane behind the first, in order, up to the bounds; it never
// waits for more. Per-key order holds (a lane's events stay in order), and the checkpoint
// passes only committed batches.
//
// A batch that fails because it is too large (TransactionTooLargeForCache 313, TransactionTooLarge
// 334, BSONObjectTooLarge 10334) is split in halves, down to one event that runs alone; each
// failure halves the bound and each success doubles it back, so it never loops. Any other
// failure (a handler error, a write conflict, an unknown commit result) aborts the batch, and
// its events run again one at a time, each in its own transaction with the stream's retries
// and dead letter: a poison event is dead-lettered alone. A handler in a batch sees Attempt 1;
// its writes in a failed batch never commit.
//
// The zero value means the defaults: one event per transaction.
type TxBatchPolicy struct {
	// MaxEvents is the most events of one transaction. Default 1 (batching off); at most 10,000.
	MaxEvents int
	// MaxBytes is the most bytes of raw change events one transaction takes; its first event is
	// taken whatever its size. Default 1 MiB.
	MaxBytes int
	// MaxDuration closes a batch early: once this long has passed since its first handler call
	// began, no further event starts in it, and it commits what it has. Default 1s.
	MaxDuration time.Duration
}

// validateInto adds b's broken rules to c, under field.
func (b TxBatchPolicy) validateInto(c *configcheck.Errors, field string, transactional bool) {
	if b.MaxEvents < 0 || b.MaxEvents > maxTxBatchEvents {
		c.Add(field+".MaxEvents", "must be between 1 and %d (0 means the default 1), got %d", maxTxBatchEvents, b.MaxEvents)
	}
	if b.MaxBytes < 0 {
		c.Add(field+".MaxBytes", "must be >= 0 (0 means the default 1 MiB), got %d", b.MaxBytes)
	}
	if b.MaxDuration < 0 {
		c.Add(field+".MaxDuration", "must be >= 0 (0 means the default 1s), got %v", b.MaxDuration)
	}
	if b != (TxBatchPolicy{}) && !transactional {
		c.Add(field, "needs Transactional (it batches the events of a Transactional stream's transactions), got Transactional false")
	}
}

// compile returns b with its defaults, in the engine's form.
func (b TxBatchPolicy) compile() engine.TxBatch {
	out := engine.TxBatch{MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes, MaxDuration: b.MaxDuration}
	if out.MaxEvents == 0 {
		out.MaxEvents = 1
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = defaultTxBatchBytes
	}
	if out.MaxDuration == 0 {
		out.MaxDuration = defaultTxBatchDuration
	}
	return out
}
