package policy

import (
	"cmp"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/enumstr"
)

// Defaults of Snapshot.
const (
	// defaultSnapshotPartitions is the default Snapshot.Partitions.
	defaultSnapshotPartitions = 4
	// defaultSnapshotBatchSize is the default Snapshot.BatchSize.
	defaultSnapshotBatchSize = 1000
	// defaultSnapshotHandoffRefresh is the default Snapshot.HandoffRefresh.
	defaultSnapshotHandoffRefresh = time.Minute
	// maxSnapshotPartitions is the largest Snapshot.Partitions accepted.
	maxSnapshotPartitions = 256
	// maxSnapshotBatchSize is the largest Snapshot.BatchSize accepted.
	maxSnapshotBatchSize = 100_000
)

// SnapshotMode (Snapshot.Mode, watchtree.SnapshotMode) says when a stream copies the documents that
// already exist in its collection through its handlers before it streams changes.
type SnapshotMode uint8

const (
	// SnapshotNever (the default) never copies existing documents: the stream starts from its
	// start position.
	SnapshotNever SnapshotMode = iota
	// SnapshotInitial copies the existing documents on the first start of the stream, the one
	// that finds no checkpoint, then streams the changes made since the copy began.
	SnapshotInitial
	// SnapshotWhenNeeded is SnapshotInitial, and also the repair when the stream's position has
	// left the oplog: the stream then applies RebuildFromSnapshot (watchtree.Stream.OnHistoryLost
	// must be left at its default or set to RebuildFromSnapshot).
	SnapshotWhenNeeded
)

// String returns "Never", "Initial" or "WhenNeeded".
func (m SnapshotMode) String() string { return enumstr.Of(snapshotModeNames, m, "SnapshotMode") }

var snapshotModeNames = []string{SnapshotNever: "Never", SnapshotInitial: "Initial", SnapshotWhenNeeded: "WhenNeeded"}

// Snapshot (watchtree.SnapshotPolicy, Stream.Snapshot; snapshot.Config.Policy) configures the copy
// of a collection's existing documents (the initial load, and the rebuild of RebuildFromSnapshot);
// the snapshot actor applies it. The zero value never copies.
//
// The copy is taken without a gap: the stream's position is captured and persisted before the
// first document is read, the documents are read in _id order in Partitions parallel ranges of
// BatchSize chunks, each document goes through the stream's handlers (OnSnapshot, else
// OnChange) with the same retries and dead letters as a change event, and once every range is
// done the stream streams from the captured position. A change made during the copy is
// therefore delivered after it, possibly to a document the copy already showed in its newer
// state: targets must be idempotent (see the README). Progress is persisted per range, so a
// stopped or crashed copy resumes where each range was; a finished copy never runs again.
type Snapshot struct {
	// Mode says when the copy runs. Default SnapshotNever.
	Mode SnapshotMode
	// Filter is a server-side query document (a bson.D, bson.M, bson.Raw or any value that
	// marshals to a document): only the documents it matches are copied. Default: all. It is
	// marshalled once, when the stream is spawned.
	Filter any
	// Partitions is the number of _id ranges read in parallel. Default 4, at most 256.
	Partitions int
	// BatchSize is the number of documents read per chunk (one find), and the unit of progress:
	// after a crash at most one chunk per range is read and handled again. Default 1000, at
	// most 100000.
	BatchSize int
	// HandoffRefresh is how often, at most, the handoff position moves forward while the copy
	// runs: an idle change stream from the handoff position (the stream's own pipeline) that has
	// returned no event up to its post-batch resume token proves that starting there skips
	// nothing, so the position is persisted there, and a long copy of a quiet collection on a
	// busy cluster does not lose its position when the oplog rolls over. Once the collection
	// changes, the position stays where it is (the change must be delivered). Default 1 minute.
	HandoffRefresh time.Duration
}

// withDefaults returns p with every zero field replaced by its default.
func (p Snapshot) withDefaults() Snapshot {
	p.Partitions = cmp.Or(p.Partitions, defaultSnapshotPartitions)
	p.BatchSize = cmp.Or(p.BatchSize, defaultSnapshotBatchSize)
	p.HandoffRefresh = cmp.Or(p.HandoffRefresh, defaultSnapshotHandoffRefresh)
	return p
}

// snapshotEnabled reports whether p copies the existing documents on the first start (Mode
// SnapshotInitial or SnapshotWhenNeeded).
func snapshotEnabled(p Snapshot) bool {
	return p.Mode == SnapshotInitial || p.Mode == SnapshotWhenNeeded
}

// Validate checks p. The error is a *configerr.Error on field "SnapshotPolicy.<Field>" and matches
// configerr.ErrInvalid.
func (p Snapshot) Validate() error {
	return validate(p, "SnapshotPolicy")
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>.
func (p Snapshot) validateInto(c *configcheck.Errors, field string) {
	if p.Mode > SnapshotWhenNeeded {
		c.Add(field+".Mode", "must be SnapshotNever, SnapshotInitial or SnapshotWhenNeeded, got %v", p.Mode)
	}
	if p.Partitions < 0 || p.Partitions > maxSnapshotPartitions {
		c.Add(field+".Partitions", "must be between 1 and %d (0 means the default %d), got %d",
			maxSnapshotPartitions, defaultSnapshotPartitions, p.Partitions)
	}
	if p.BatchSize < 0 || p.BatchSize > maxSnapshotBatchSize {
		c.Add(field+".BatchSize", "must be between 1 and %d (0 means the default %d), got %d",
			maxSnapshotBatchSize, defaultSnapshotBatchSize, p.BatchSize)
	}
	if p.HandoffRefresh < 0 {
		c.Add(field+".HandoffRefresh", "must be > 0 (0 means the default %v), got %v", defaultSnapshotHandoffRefresh, p.HandoffRefresh)
	}
	if _, err := marshalFilter(p); err != nil {
		c.Add(field+".Filter", "%v", err)
	}
}

// marshalFilter returns p.Filter as a BSON document (a copy of a bson.Raw); nil when Filter is
// nil. The error says why Filter is not a document; Validate reports it on SnapshotPolicy.Filter.
func marshalFilter(p Snapshot) (bson.Raw, error) {
	switch f := p.Filter.(type) {
	case nil:
		return nil, nil
	case bson.Raw:
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("must be a valid BSON document: %v", err)
		}
		return append(bson.Raw(nil), f...), nil
	}
	b, err := bson.Marshal(p.Filter)
	if err != nil {
		return nil, fmt.Errorf("must marshal to a BSON query document, got %T: %v", p.Filter, err)
	}
	return b, nil
}
