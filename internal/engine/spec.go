package engine

import (
	"fmt"
	"github.com/watchtree/watchtree/internal/policyx"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/policy"
	"github.com/watchtree/watchtree/status"
	"github.com/watchtree/watchtree/store"
)

// Spec is the validated, defaulted, non-generic form of a watchtree.Stream[T]: everything the
// actors of one stream tree need. The root package builds it (Stream.compile); the only generic
// piece, decoding and calling the handlers, is behind Router.
type Spec struct {
	// Name is the stream's name.
	Name string
	// Client is the stream's own client; nil: the runtime's Config.Client.
	Client *mongo.Client
	// Database and Collection are the watched namespace as the stream names it: a collection
	// stream with an empty Database watches in the runtime's Config.Database.
	Database, Collection string
	// Pipeline holds the user's stages, marshalled; they are appended after $changeStream.
	Pipeline []bson.Raw
	// FullDocument and PreImage are the server's fullDocument and fullDocumentBeforeChange
	// options ("" sends none).
	FullDocument, PreImage string
	// Split says whether the stream appends $changeStreamSplitLargeEvent.
	Split Split
	// SingleLeader is true for a SingleLeader stream (one instance at a time, under a lease);
	// false for AllInstances.
	SingleLeader bool
	// Shared asks for a shared cursor (watchtree.Shared, or the default of a Collection
	// stream): the runtime's hub of the stream's client, database and option class feeds it
	// (hub.go); false: a dedicated cursor. SharedAsked: the user set Shared, so a stream that
	// cannot share is warned about (Status), not only logged.
	Shared, SharedAsked bool
	// Lanes is the number of dispatcher lanes (>= 1).
	Lanes int
	// Start is the position of the first start after the tree is spawned.
	Start policy.StartPosition
	// Retry, Restart and Checkpoint are the stream's policies, every default resolved by the
	// root's compile (an Ephemeral Checkpoint stays as given: its fields are 0).
	Retry      policy.Retry
	Restart    policy.Restart
	Checkpoint policy.Checkpoint
	// DeadLetter is the stream's defaulted dead-letter policy.
	DeadLetter DeadLetter
	// OnHistoryLost is the lost-history policy (RebuildFromSnapshot for SnapshotWhenNeeded).
	OnHistoryLost policy.HistoryLost
	// InvalidateRestart opens a new change stream after an invalidate (InvalidateRestart);
	// false stops the stream terminally (InvalidateStop).
	InvalidateRestart bool
	// Snapshot is the defaulted snapshot policy; SnapshotFilter its Filter, marshalled.
	Snapshot       policy.Snapshot
	SnapshotFilter bson.Raw
	// Router decodes the raw events and calls the user's handlers.
	Router dispatcher.Router
	// Transactional runs each handler call in a transaction with the event's applied record
	// and, for SingleLeader, its lane's fence (exactly.go); TxBatch (defaulted) lets several
	// consecutive events of a lane share one.
	Transactional bool
	TxBatch       TxBatch
}

// TxBatch bounds the batches of a Transactional stream (watchtree.TxBatchPolicy, defaulted).
type TxBatch struct {
	// MaxEvents is the most events of one transaction (1: one event per transaction).
	MaxEvents int
	// MaxBytes is the most bytes of raw change events of one transaction (its first event is
	// taken whatever its size).
	MaxBytes int
	// MaxDuration closes a batch early: no event starts in it once its first started this long
	// ago.
	MaxDuration time.Duration
}

// DeadLetter is the stream's dead-letter policy (watchtree.DeadLetterPolicy, defaulted).
type DeadLetter struct {
	// Disabled drops the events whose attempts ran out instead of recording them.
	Disabled bool
	// Collection is the dead-letter collection of the default MongoDB store.
	Collection string
	// Retention is how long a record is kept.
	Retention time.Duration
}

// Split says whether a stream's change stream splits events over 16 MiB
// (watchtree.SplitMode).
type Split int

// The Split values.
const (
	// SplitAuto splits when the stream requests full documents or pre-images and the server
	// supports the stage.
	SplitAuto Split = iota
	// SplitOn always appends the stage.
	SplitOn
	// SplitOff never appends it.
	SplitOff
)

// Scope is what a stream watches.
type Scope uint8

// The scopes.
const (
	ScopeCollection Scope = iota // Collection.Watch
	ScopeDatabase                // Database.Watch
	ScopeCluster                 // Client.Watch
)

// String returns "collection", "database" or "cluster".
func (w Scope) String() string {
	switch w {
	case ScopeCollection:
		return "collection"
	case ScopeDatabase:
		return "database"
	case ScopeCluster:
		return "cluster"
	}
	return fmt.Sprintf("watchScope(%d)", w)
}

// Scope is what s watches, decided by Collection and Database alone.
func (s *Spec) Scope() Scope {
	switch {
	case s.Collection != "":
		return ScopeCollection
	case s.Database != "":
		return ScopeDatabase
	}
	return ScopeCluster
}

// Mode returns status.ModeAllInstances or status.ModeSingleLeader (watchtree.Mode's String).
func (s *Spec) Mode() string {
	if s.SingleLeader {
		return status.ModeSingleLeader
	}
	return status.ModeAllInstances
}

// Records is the key of the stream's checkpoint, dead letters and gap records on the instance
// named instance: the one place the mode decides it. An AllInstances stream keeps one scope per
// instance; a SingleLeader stream one shared scope (no instance), whichever instance holds the
// lease.
func (s *Spec) Records(instance string) store.Scope {
	if s.SingleLeader {
		return store.Scope{Stream: s.Name}
	}
	return store.Scope{Stream: s.Name, Instance: instance}
}

// Snapshots reports whether the stream can run a snapshot (a snapshot mode, or the
// RebuildFromSnapshot repair).
func (s *Spec) Snapshots() bool {
	return policyx.SnapshotEnabled(s.Snapshot) || policyx.HistoryLostKindOf(s.OnHistoryLost) == policyx.HistoryRebuildFromSnapshot
}

// CursorComment is the comment every cursor of the stream carries, so operators can find it in
// currentOp and the server logs.
func (s *Spec) CursorComment() string { return "watchtree:" + s.Name }

// ChangeStreamOptions returns the options every cursor of the stream is opened with: the
// fullDocument modes and the comment. The stream actor adds the start position (resumeAfter,
// startAfter or startAtOperationTime) and batch settings.
func (s *Spec) ChangeStreamOptions() *options.ChangeStreamOptionsBuilder {
	o := options.ChangeStream().SetComment(s.CursorComment())
	if s.FullDocument != "" {
		o.SetFullDocument(options.FullDocument(s.FullDocument))
	}
	if s.PreImage != "" {
		o.SetFullDocumentBeforeChange(options.FullDocument(s.PreImage))
	}
	return o
}

// splitStage is the stage that splits events over 16 MiB into fragments.
const splitStage = "$changeStreamSplitLargeEvent"

// UserSplits reports whether the user's pipeline ends with splitStage itself.
func (s *Spec) UserSplits() bool {
	p := s.Pipeline
	if len(p) == 0 {
		return false
	}
	elems, err := p[len(p)-1].Elements()
	return err == nil && len(elems) == 1 && elems[0].Key() == splitStage
}

// WantsSplit reports whether the stream appends splitStage: always with SplitOn, never with
// SplitOff or when the user's pipeline has it; with SplitAuto when it requests full documents or
// pre-images and the server supports the stage (serverSplits).
func (s *Spec) WantsSplit(serverSplits bool) bool {
	switch {
	case s.UserSplits() || s.Split == SplitOff:
		return false
	case s.Split == SplitOn:
		return true
	}
	return serverSplits && (s.FullDocument != "" || s.PreImage != "")
}

// WatchPipeline returns the user stages in the form mongo's Watch methods accept.
func (s *Spec) WatchPipeline() []bson.Raw {
	if s.Pipeline == nil {
		return []bson.Raw{}
	}
	return s.Pipeline
}

// SignalsCollection is the collection of the records' database that on-demand snapshots write
// their watermarks to (watchtree.SignalsCollection).
const SignalsCollection = "_wt_signals"
