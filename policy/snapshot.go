package policy

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Defaults of Snapshot.
const (
	// defaultSnapshotPartitions is the default Snapshot.Partitions.
	defaultSnapshotPartitions = 4
	// DefaultSnapshotBatchSize is the default Snapshot.BatchSize.
	DefaultSnapshotBatchSize = 1000
	// defaultSnapshotHandoffRefresh is the default Snapshot.HandoffRefresh.
	defaultSnapshotHandoffRefresh = time.Minute
	// maxSnapshotPartitions is the largest Snapshot.Partitions accepted.
	maxSnapshotPartitions = 256
	// maxSnapshotBatchSize is the largest Snapshot.BatchSize accepted.
	maxSnapshotBatchSize = 100_000
)

// SnapshotMode is watchtree.SnapshotMode in the form the tree takes (its values are the same).
type SnapshotMode uint8

// The values of watchtree.SnapshotNever, SnapshotInitial and SnapshotWhenNeeded.
const (
	SnapshotNever SnapshotMode = iota
	SnapshotInitial
	SnapshotWhenNeeded
)

// String returns "Never", "Initial" or "WhenNeeded".
func (m SnapshotMode) String() string {
	switch m {
	case SnapshotNever:
		return "Never"
	case SnapshotInitial:
		return "Initial"
	case SnapshotWhenNeeded:
		return "WhenNeeded"
	}
	return fmt.Sprintf("SnapshotMode(%d)", m)
}

// Snapshot is the snapshot actor's form of watchtree.SnapshotPolicy (snapshot.Config.Policy,
// checkpointer.Config.Snapshot): the same fields, Mode as this package's SnapshotMode.
// watchtree.SnapshotPolicy documents how the copy runs.
type Snapshot struct {
	// Mode says when the copy runs. Default SnapshotNever.
	Mode SnapshotMode
	// Filter is a server-side query document (bson.D, bson.M, bson.Raw or any value that
	// marshals to a document): only the documents it matches are copied. Default nil: all.
	Filter any
	// Partitions is the number of _id ranges read in parallel. Default 4, at most 256.
	Partitions int
	// BatchSize is the number of documents read per chunk (one find), the unit of progress.
	// Default 1000, at most 100000.
	BatchSize int
	// HandoffRefresh is how often, at most, the handoff position moves forward while the copy
	// runs on a quiet collection. Default 1 minute.
	HandoffRefresh time.Duration
}

// withDefaults returns p with every zero field replaced by its default.
func (p Snapshot) withDefaults() Snapshot {
	if p.Partitions == 0 {
		p.Partitions = defaultSnapshotPartitions
	}
	if p.BatchSize == 0 {
		p.BatchSize = DefaultSnapshotBatchSize
	}
	if p.HandoffRefresh == 0 {
		p.HandoffRefresh = defaultSnapshotHandoffRefresh
	}
	return p
}

// SnapshotEnabled reports whether p copies the existing documents on the first start (Mode
// SnapshotInitial or SnapshotWhenNeeded).
func SnapshotEnabled(p Snapshot) bool {
	return p.Mode == SnapshotInitial || p.Mode == SnapshotWhenNeeded
}

// Validate checks p. The error is a *configerr.Error on field "SnapshotPolicy.<Field>" and matches
// configerr.ErrInvalid.
func (p Snapshot) Validate() error {
	c := NewErrors("")
	p.validateInto(c, "SnapshotPolicy")
	return c.Err()
}

// validateInto adds the broken rules of p to c, naming each field field.<Name>.
func (p Snapshot) validateInto(c *Errors, field string) {
	if p.Mode > SnapshotWhenNeeded {
		c.Add(field+".Mode", "must be SnapshotNever, SnapshotInitial or SnapshotWhenNeeded, got %v", p.Mode)
	}
	if p.Partitions < 0 || p.Partitions > maxSnapshotPartitions {
		c.Add(field+".Partitions", "must be between 1 and %d (0 means the default %d), got %d",
			maxSnapshotPartitions, defaultSnapshotPartitions, p.Partitions)
	}
	if p.BatchSize < 0 || p.BatchSize > maxSnapshotBatchSize {
		c.Add(field+".BatchSize", "must be between 1 and %d (0 means the default %d), got %d",
			maxSnapshotBatchSize, DefaultSnapshotBatchSize, p.BatchSize)
	}
	if p.HandoffRefresh < 0 {
		c.Add(field+".HandoffRefresh", "must be > 0 (0 means the default %v), got %v", defaultSnapshotHandoffRefresh, p.HandoffRefresh)
	}
	if _, err := MarshalFilter(p); err != nil {
		c.Add(field+".Filter", "%v", err)
	}
}

// MarshalFilter returns p.Filter as a BSON document (a copy of a bson.Raw); nil when Filter is
// nil. The error says why Filter is not a document; Validate reports it on SnapshotPolicy.Filter.
func MarshalFilter(p Snapshot) (bson.Raw, error) {
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
