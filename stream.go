package watchtree

import (
	"context"
	"fmt"
	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/policyx"
	"reflect"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/policy"
)

// maxLanes is the largest Stream.Lanes accepted: the dispatcher's bound.
const maxLanes = treekit.MaxLanes

// Handler handles one change event. Returning nil settles the event. Any other error is retried
// following the stream's RetryPolicy, unless it is marked with Permanent (dead letter at once) or
// made by Skip (settled on purpose, no dead letter). A panic is recovered by the runtime into an
// error carrying the stack, and treated like a returned error. ctx is cancelled when the stream
// stops; a handler should return promptly then (its event stays unsettled and is redelivered).
//
// A handler that calls runtime.Goexit (testing's t.FailNow and t.Fatal do) fails that attempt
// with dispatcher.ErrHandlerGoexit, a retryable error; the lane goes on in a new goroutine. In
// tests, prefer t.Error and return.
type Handler[T any] func(ctx context.Context, ev *Event[T]) error

// Stream describes one change-stream consumer of documents of type T. Pass it to the runtime's
// Spawn (or Props). It is a value: the runtime takes a validated copy when it is spawned, and
// later changes to the value have no effect.
//
// The zero value of every field but Name and the handlers means its documented default.
// Validate (also run by Spawn) fails fast with a *ConfigError naming the field and the rule.
//
// What is watched is decided by Collection and Database alone:
//   - Collection set: that collection (Collection.Watch), in Database, or, when Database is
//     empty, in the runtime's Config.Database;
//   - Collection empty, Database set: the whole database (Database.Watch), all its collections
//     but system.*;
//   - both empty: the whole cluster (Client.Watch), all databases but admin, config and local.
type Stream[T any] struct {
	// Name identifies the stream: the key of its checkpoint, dead letters and gap records (with
	// Config.InstanceName for an AllInstances stream, which keeps them per instance) and of its
	// lease, the cursor comment "watchtree:<Name>", the actor names, and every log line. It must be unique in the runtime and be 1-100 characters from
	// [A-Za-z0-9._-], starting with a letter or digit. Renaming a stream orphans its checkpoint.
	// Required.
	Name string
	// Client is an optional client for this stream's cursor (multi-cluster setups). Default: the
	// runtime's Config.Client. Checkpoints, dead letters and leases always use Config.Client.
	Client *mongo.Client
	// Database is the watched database. Default empty: see the type's doc for what is watched
	// then.
	Database string
	// Collection is the watched collection. Default empty: a database- or cluster-wide stream.
	Collection string
	// Pipeline holds server-side stages appended after $changeStream: a mongo.Pipeline, a bson.A
	// of documents, a []bson.M, or any slice whose elements marshal to BSON documents. Each stage
	// must have exactly one field, a "$" operator other than $changeStream, $out and $merge. The
	// stages must keep the event's _id (the resume token) unmodified, or the server fails the
	// cursor with ChangeStreamFatalError 280: Spawn and Validate refuse a $project, $unset,
	// $addFields/$set or $replaceRoot/$replaceWith stage that removes or changes _id (a new root
	// keeps it when it ends with {_id: "$_id"}). Filtering out drop, rename or invalidate events
	// hides them from OnInvalidate handling. The pipeline is marshalled once, when spawned.
	// Default none.
	Pipeline any
	// Filter is an optional in-process predicate. It runs after decoding, only for events that
	// have a handler; an event it rejects (false) settles as filtered, without a handler call.
	// Event.Attempt is 0 inside Filter. It must be fast and must not block; a panic in it is an
	// error of the event, like a handler panic. Like a handler, it must not keep ev after it
	// returns (the Event is reused). Default none: every event with a handler is handled.
	Filter func(ev *Event[T]) bool
	// FullDocument is the fullDocument option: what Event.FullDocument holds on updates.
	// Default FullDocumentDefault (nothing on updates).
	FullDocument FullDocumentMode
	// FullDocumentBeforeChange is the fullDocumentBeforeChange option (pre-images).
	// Default PreImageOff.
	FullDocumentBeforeChange PreImageMode
	// SplitLargeEvents says whether events over 16 MiB are split by the server and joined again
	// before the handler ($changeStreamSplitLargeEvent, appended after Pipeline). Default
	// SplitAuto: on when FullDocument or FullDocumentBeforeChange is set and the server is
	// MongoDB 7.0 or later. A Pipeline that ends with the stage itself needs nothing here.
	SplitLargeEvents SplitMode
	// Mode is the deployment mode. Default AllInstances.
	Mode Mode
	// Cursor selects a cursor shared with the runtime's other Collection streams on the same
	// client, database and option class (Shared) or one of the stream's own (Dedicated).
	// Default (CursorDefault): Shared for a Collection stream, Dedicated otherwise. Shared needs
	// a Collection stream.
	Cursor CursorMode
	// Lanes is the number of events processed concurrently. Events of the same document key
	// always go to the same lane, in order; different keys run in parallel. With 1 lane
	// processing is strictly sequential. Default 1, at most 1024.
	Lanes int
	// StartPosition is where a newly spawned stream starts. Default Resume.
	StartPosition StartPosition
	// Retry governs handler retries. Default 3 attempts, 500ms × 2^(n-1) capped at 30s, ±20%.
	Retry RetryPolicy
	// Restart governs restarts of the stream after a crash. Default unlimited, 1s × 2^(n-1)
	// capped at 60s.
	Restart RestartPolicy
	// Checkpoint governs when the resume position is persisted. Default every 1,000 settlements
	// or 1s.
	Checkpoint CheckpointPolicy
	// DeadLetter governs where events that exhausted their attempts go. Default on,
	// "_wt_dead_letters", 14 days.
	DeadLetter DeadLetterPolicy
	// OnHistoryLost is applied when the saved position is no longer in the oplog. Default Fail;
	// for a stream with Checkpoint.Ephemeral, ResumeFromNow: the gap is recorded and reported
	// (HistoryLost, GapRecorded) and the stream goes on from the current position, instead of
	// an in-memory consumer stopping for good. Set Fail explicitly to keep Fail.
	OnHistoryLost HistoryLostPolicy
	// OnInvalidate is applied after an invalidate event. Default InvalidateStop.
	OnInvalidate InvalidatePolicy
	// Transactional makes the handlers' writes into MongoDB exactly once. Each handler call runs
	// in a multi-document transaction on Config.Client; its ctx carries the session, so every
	// operation the handler makes through Config.Client with that ctx (or one derived from it)
	// joins the transaction. The transaction also inserts the event's applied record (collection
	// "_wt_applied" in the records' database) and, for a SingleLeader stream, checks the lane's
	// fence document ("_wt_fences") against the lease's epoch, then commits with write concern
	// majority. An event whose record exists settles as skipped ("already applied") without a
	// handler call's effect: a redelivery after a crash, a restart or a takeover. A deposed
	// leader's transaction never commits. A dead letter commits with the event's record.
	//
	// Any error aborts the transaction and is retried by Retry, like any handler error:
	// TransientTransactionError and UnknownTransactionCommitResult count as failed attempts
	// (bounded by Retry, not by the driver's 120 s), each attempt is a new transaction, and
	// Permanent and Skip keep their meaning (nothing the attempt wrote commits). A write through
	// another client fails with mongo.ErrWrongClient, and the event is dead-lettered at once.
	//
	// Not exactly once, and not detectable: writes made with a context that does not carry the
	// handler's session (context.Background), writes to another cluster through a client of
	// its own, and side effects outside MongoDB (an e-mail, an HTTP call): they happen once per
	// attempt. Needs a replica set or a sharded cluster (transactions). Default false.
	Transactional bool
	// TxBatch lets several consecutive events of one lane of a Transactional stream share a
	// transaction, bounded in events, bytes and time. Default: one event per transaction.
	TxBatch TxBatchPolicy
	// Snapshot copies the collection's existing documents through the handlers before the
	// change stream (the initial load; also the rebuild of RebuildFromSnapshot). Default
	// SnapshotNever. It needs a Collection stream.
	Snapshot SnapshotPolicy

	// OnInsert, OnUpdate, OnReplace and OnDelete handle the events of their operation type. An
	// event whose type has no typed handler goes to OnChange; with no OnChange either, it settles
	// as unhandled. drop, rename, dropDatabase, invalidate and any other operation type reach
	// OnChange only. Default none; at least one handler of the six must be set.
	OnInsert  Handler[T]
	OnUpdate  Handler[T]
	OnReplace Handler[T]
	OnDelete  Handler[T]
	OnChange  Handler[T]
	// OnSnapshot handles the documents a snapshot copies (events of OperationType OpSnapshot,
	// FullDocument set, ClusterTime zero). Default none: they go to OnChange.
	OnSnapshot Handler[T]
}

// Spec is a stream description the runtime can spawn, whatever its document type. Stream[T]
// implements it; the interface is sealed (compile is unexported), because Go methods cannot take
// type parameters and the runtime must not see T: compile turns it into the engine's
// non-generic spec.
type Spec interface {
	// StreamName returns the stream's Name.
	StreamName() string
	// Validate checks the spec; see Stream.Validate.
	Validate() error
	// compile validates the spec and returns its defaulted, non-generic form.
	compile() (*engine.Spec, error)
}

var _ Spec = Stream[bson.Raw]{}

// StreamName returns s.Name.
func (s Stream[T]) StreamName() string { return s.Name }

// Validate checks s without contacting any server. It returns nil, or the broken rules as
// *ConfigError values (joined with errors.Join), each naming the field and the rule, for example
// `watchtree: Stream "orders": Retry.Multiplier must be finite and >= 1, got NaN`. The errors match
// ErrInvalidConfig; a missing handler also matches ErrNoHandler.
//
// Validate cannot know whether the Pipeline lets a typed handler's events through, nor whether
// the collection records pre-images; those are not errors.
func (s Stream[T]) Validate() error {
	_, err := s.check()
	return err
}

// check validates s and returns the marshalled pipeline.
func (s Stream[T]) check() ([]bson.Raw, error) {
	c := configcheck.StreamErrors(s.Name)
	if rule := streamNameRule(s.Name); rule != "" {
		c.Add("Name", "%s, got %q", rule, s.Name)
	}
	optionalName(c, "Database", s.Database, databaseNameRule)
	optionalName(c, "Collection", s.Collection, collectionNameRule)
	pipeline, perr := marshalPipeline(s.Pipeline)
	if perr != nil {
		c.Add(perr.field, "%s", perr.rule)
	}
	if !s.FullDocument.valid() {
		c.Add("FullDocument", `must be one of "", "updateLookup", "whenAvailable", "required", got %q`, string(s.FullDocument))
	}
	if !s.FullDocumentBeforeChange.valid() {
		c.Add("FullDocumentBeforeChange", `must be one of "", "whenAvailable", "required", got %q`, string(s.FullDocumentBeforeChange))
	}
	if s.SplitLargeEvents < SplitAuto || s.SplitLargeEvents > SplitOff {
		c.Add("SplitLargeEvents", "must be SplitAuto, SplitOn or SplitOff, got %v", s.SplitLargeEvents)
	}
	if s.Mode != AllInstances && s.Mode != SingleLeader {
		c.Add("Mode", "must be AllInstances or SingleLeader, got %v", s.Mode)
	}
	switch {
	case s.Cursor != CursorDefault && s.Cursor != Dedicated && s.Cursor != Shared:
		c.Add("Cursor", "must be CursorDefault, Dedicated or Shared, got %v", s.Cursor)
	case s.Cursor == Shared && s.Collection == "":
		c.Add("Cursor", "Shared needs a Collection stream (a shared cursor serves collections of one database), got a %s stream", map[bool]string{true: "database", false: "cluster"}[s.Database != ""])
	}
	if s.Lanes < 0 || s.Lanes > maxLanes {
		c.Add("Lanes", "must be between 1 and %d (0 means the default 1), got %d", maxLanes, s.Lanes)
	}
	policyx.ValidateInto(c, "StartPosition", s.StartPosition)
	policyx.ValidateInto(c, "Retry", s.Retry)
	policyx.ValidateInto(c, "Restart", s.Restart)
	policyx.ValidateInto(c, "Checkpoint", s.Checkpoint)
	policyx.ValidateStartInto(c, "StartPosition", s.Checkpoint, s.StartPosition)
	if s.Checkpoint.Ephemeral && s.Mode == SingleLeader {
		c.Add("Checkpoint.Ephemeral", "requires Mode AllInstances: a SingleLeader stream's one shared position is what the next leader resumes from, got Mode SingleLeader")
	}
	if s.Transactional && s.Checkpoint.Ephemeral {
		c.Add("Transactional", "requires a stored checkpoint: an Ephemeral stream starts from now after a restart, so its applied records would protect nothing and never be purged, got Checkpoint.Ephemeral true")
	}
	s.TxBatch.validateInto(c, "TxBatch", s.Transactional)
	s.DeadLetter.validateInto(c, "DeadLetter")
	policyx.ValidateInto(c, "OnHistoryLost", s.OnHistoryLost)
	if s.OnInvalidate != InvalidateStop && s.OnInvalidate != InvalidateRestart {
		c.Add("OnInvalidate", "must be InvalidateStop or InvalidateRestart, got %v", s.OnInvalidate)
	}
	snap := s.Snapshot
	policyx.ValidateInto(c, "Snapshot", snap)
	if policyx.SnapshotEnabled(snap) || policyx.HistoryLostKindOf(s.OnHistoryLost) == policyx.HistoryRebuildFromSnapshot {
		field := "Snapshot.Mode"
		if !policyx.SnapshotEnabled(snap) {
			field = "OnHistoryLost"
		}
		if s.Collection == "" {
			c.Add(field, "needs a Collection stream (a snapshot copies one collection), got a %s stream", map[bool]string{true: "database", false: "cluster"}[s.Database != ""])
		}
		if policyx.StartKindOf(s.StartPosition) == policyx.StartAt && policyx.SnapshotEnabled(snap) {
			c.Add("Snapshot.Mode", "cannot be combined with StartPosition At (a snapshot starts from the current position)")
		}
	}
	if s.Snapshot.Mode == SnapshotWhenNeeded {
		if k := policyx.HistoryLostKindOf(s.OnHistoryLost); k != policyx.HistoryFail && k != policyx.HistoryRebuildFromSnapshot {
			c.Add("OnHistoryLost", "must be left at its default or be RebuildFromSnapshot with Snapshot.Mode SnapshotWhenNeeded, got %v", s.OnHistoryLost)
		}
	}
	if s.OnInsert == nil && s.OnUpdate == nil && s.OnReplace == nil && s.OnDelete == nil && s.OnChange == nil && s.OnSnapshot == nil {
		c.AddErr("OnChange", ErrNoHandler, "must be set when no typed handler (OnInsert, OnUpdate, OnReplace, OnDelete) is; the stream has no handler")
	}
	return pipeline, c.Err()
}

// compile validates s and returns its compiled form, the engine's Spec, with every default
// resolved here, once: the zero value of a field becomes the value its godoc states, taken from
// the one source of that value (package policy's default constants for the policies,
// DeadLetterPolicy's for dead letters, dispatcher.DefaultConfig for Lanes). The engine builds its actor
// configurations from the Spec and from each actor's DefaultConfig (internal/engine/tree.go)
// and the actors fill in nothing the Spec holds. TestCompiledDefaults compares the result of a
// zero Stream with the documented defaults, so a default changed in one place only fails it.
//
// One exception: an Ephemeral Checkpoint stays as given, its fields 0, because an ephemeral
// stream writes no checkpoint and its policy must not name a write schedule (the checkpointer
// refuses set fields with Ephemeral; it bounds the in-flight events by MaxUnflushed's default).
func (s Stream[T]) compile() (*engine.Spec, error) {
	pipeline, err := s.check()
	if err != nil {
		return nil, err
	}
	cs := &engine.Spec{
		Name:              s.Name,
		Client:            s.Client,
		Database:          s.Database,
		Collection:        s.Collection,
		Pipeline:          pipeline,
		FullDocument:      string(s.FullDocument),
		PreImage:          string(s.FullDocumentBeforeChange),
		Split:             splitOf(s.SplitLargeEvents),
		SingleLeader:      s.Mode == SingleLeader,
		Shared:            s.Cursor == Shared || (s.Cursor == CursorDefault && s.Collection != ""),
		SharedAsked:       s.Cursor == Shared,
		Lanes:             s.Lanes,
		Start:             s.StartPosition,
		Retry:             policyx.WithDefaults(s.Retry),
		Restart:           policyx.WithDefaults(s.Restart),
		Checkpoint:        compileCheckpoint(s.Checkpoint),
		DeadLetter:        engine.DeadLetter(s.DeadLetter.withDefaults()),
		OnHistoryLost:     s.OnHistoryLost,
		InvalidateRestart: s.OnInvalidate == InvalidateRestart,
		Snapshot:          policyx.WithDefaults(s.Snapshot),
		Router:            newRouter(s),
		Transactional:     s.Transactional,
		TxBatch:           s.TxBatch.compile(),
	}
	cs.SnapshotFilter, _ = policyx.MarshalFilter(cs.Snapshot) // validated by check
	if cs.Snapshot.Mode == policy.SnapshotWhenNeeded && policyx.HistoryLostKindOf(cs.OnHistoryLost) == policyx.HistoryFail {
		cs.OnHistoryLost = policy.RebuildFromSnapshot
	}
	if cs.Checkpoint.Ephemeral && !policyx.HistoryLostSet(cs.OnHistoryLost) {
		// In-memory state that stopped following the collection would go stale unnoticed.
		cs.OnHistoryLost = policy.ResumeFromNow
	}
	if cs.Lanes == 0 {
		cs.Lanes = dispatcher.DefaultConfig().Lanes
	}
	return cs, nil
}

// compileCheckpoint is p with its defaults resolved, but for an Ephemeral p, which stays as
// given (see compile).
func compileCheckpoint(p policy.Checkpoint) policy.Checkpoint {
	if p.Ephemeral {
		return p
	}
	return policyx.WithDefaults(p)
}

// splitOf is the engine's form of m (validated by check).
func splitOf(m SplitMode) engine.Split {
	switch m {
	case SplitOn:
		return engine.SplitOn
	case SplitOff:
		return engine.SplitOff
	}
	return engine.SplitAuto
}

// pipelineError names the pipeline element that broke a rule.
type pipelineError struct{ field, rule string }

// marshalPipeline turns a user pipeline into marshalled stages and checks each: a document with
// exactly one field, a "$" operator other than $changeStream, $out and $merge, that keeps the
// event's _id (idRule).
func marshalPipeline(p any) ([]bson.Raw, *pipelineError) {
	if p == nil {
		return nil, nil
	}
	switch p.(type) {
	case bson.D, bson.M, bson.Raw, map[string]any:
		return nil, &pipelineError{"Pipeline", fmt.Sprintf("must be a list of stages (mongo.Pipeline, bson.A, []bson.M), got a single document %T", p)}
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return nil, &pipelineError{"Pipeline", fmt.Sprintf("must be a list of stages (mongo.Pipeline, bson.A, []bson.M), got %T", p)}
	}
	if v.Kind() == reflect.Slice && v.IsNil() {
		return nil, nil
	}
	stages := make([]bson.Raw, 0, v.Len())
	for i := range v.Len() {
		field := fmt.Sprintf("Pipeline[%d]", i)
		elem := v.Index(i).Interface()
		var raw bson.Raw
		switch e := elem.(type) {
		case nil:
			return nil, &pipelineError{field, "must be a stage document, got nil"}
		case bson.Raw:
			if err := e.Validate(); err != nil {
				return nil, &pipelineError{field, "must be a valid BSON document: " + err.Error()}
			}
			raw = append(bson.Raw(nil), e...)
		default:
			b, err := bson.Marshal(e)
			if err != nil {
				return nil, &pipelineError{field, fmt.Sprintf("must marshal to a BSON document, got %T: %v", elem, err)}
			}
			raw = b
		}
		elems, err := raw.Elements()
		if err != nil {
			return nil, &pipelineError{field, "must be a valid BSON document: " + err.Error()}
		}
		if len(elems) != 1 {
			return nil, &pipelineError{field, fmt.Sprintf("must have exactly one field (the stage operator), got %d", len(elems))}
		}
		switch op := elems[0].Key(); {
		case !strings.HasPrefix(op, "$"):
			return nil, &pipelineError{field, fmt.Sprintf(`must be a stage operator starting with "$", got %q`, op)}
		case op == "$changeStream":
			return nil, &pipelineError{field, "must not be $changeStream; watchtree adds it"}
		case op == "$out" || op == "$merge":
			return nil, &pipelineError{field, fmt.Sprintf("must not be %s; a change stream cannot write", op)}
		}
		if rule := idRule(elems[0].Key(), elems[0].Value()); rule != "" {
			return nil, &pipelineError{field, rule}
		}
		stages = append(stages, raw)
	}
	return stages, nil
}
