package watchtree

import (
	"context"
	"strings"
	"time"

	"github.com/watchtree/watchtree/internal/configcheck"
	"github.com/watchtree/watchtree/internal/engine"
	"github.com/watchtree/watchtree/internal/enumstr"
	"github.com/watchtree/watchtree/policy"
)

// Mode is the deployment mode of a stream.
type Mode int

const (
	// AllInstances (the default) runs the stream on every instance that spawns it, without
	// coordination: each sees every event, on its own. Each instance keeps its own position,
	// dead letters and gap records, keyed by (stream, Config.InstanceName): it resumes only
	// from its own checkpoint, another instance's progress never moves it, and it lists and
	// replays only its own dead letters. Use it for per-instance work: cache invalidation,
	// in-memory state (with CheckpointPolicy.Ephemeral), WebSocket pushes, a projection each
	// instance keeps for itself.
	AllInstances Mode = iota
	// SingleLeader runs the stream on one instance at a time, under a lease in Config.Leases
	// (default "_wt_leases"); the others stand by and take over when the lease expires or is
	// released, and leaderships are balanced over the instances (Config.Lease). The stream has
	// one shared position (and shared dead letters and gap records), written only by the lease
	// holder: checkpoint and dead-letter writes are fenced by the lease epoch, so a deposed
	// leader's write is refused and its stream stops at once.
	SingleLeader
)

// modeOf is the Mode a compiled spec runs in.
func modeOf(cs *engine.Spec) Mode {
	if cs.SingleLeader {
		return SingleLeader
	}
	return AllInstances
}

// String returns "AllInstances" or "SingleLeader".
func (m Mode) String() string { return enumstr.Of(modeNames, m, "Mode") }

var modeNames = []string{AllInstances: "AllInstances", SingleLeader: "SingleLeader"}

// FullDocumentMode is the change stream's fullDocument option: what Event.FullDocument holds on
// update events. Insert and replace events always carry the document. The value is the server
// string.
type FullDocumentMode string

const (
	// FullDocumentDefault (the zero value) sends no option: update events have no FullDocument.
	FullDocumentDefault FullDocumentMode = ""
	// FullDocumentUpdateLookup looks the current document up when the event is read; it may be
	// newer than the update, and is nil if the document is gone.
	FullDocumentUpdateLookup FullDocumentMode = "updateLookup"
	// FullDocumentWhenAvailable returns the post-image when the collection records them
	// (changeStreamPreAndPostImages), nil otherwise.
	FullDocumentWhenAvailable FullDocumentMode = "whenAvailable"
	// FullDocumentRequired returns the post-image, and fails the cursor if it is missing.
	FullDocumentRequired FullDocumentMode = "required"
)

func (m FullDocumentMode) valid() bool {
	switch m {
	case FullDocumentDefault, FullDocumentUpdateLookup, FullDocumentWhenAvailable, FullDocumentRequired:
		return true
	}
	return false
}

// PreImageMode is the change stream's fullDocumentBeforeChange option: what
// Event.FullDocumentBeforeChange holds on update, replace and delete events. Pre-images need
// changeStreamPreAndPostImages enabled on the collection. The value is the server string.
type PreImageMode string

const (
	// PreImageOff (the zero value) sends no option: no pre-images.
	PreImageOff PreImageMode = ""
	// PreImageWhenAvailable returns the pre-image when recorded, nil otherwise.
	PreImageWhenAvailable PreImageMode = "whenAvailable"
	// PreImageRequired returns the pre-image, and fails the cursor if it is missing.
	PreImageRequired PreImageMode = "required"
)

func (m PreImageMode) valid() bool {
	switch m {
	case PreImageOff, PreImageWhenAvailable, PreImageRequired:
		return true
	}
	return false
}

// SplitMode says whether a stream's change stream splits events larger than 16 MiB into
// fragments ($changeStreamSplitLargeEvent, MongoDB 7.0+ and 6.0.9+). Without it such an event
// (typically a large document with FullDocument and a pre-image, each up to 16 MiB) fails the
// cursor with BSONObjectTooLarge (10334) at every attempt, and the stream cannot get past it.
// With it, the stream actor joins the fragments again: a handler always sees one whole event,
// and the stream's checkpoint never points inside one.
type SplitMode int

const (
	// SplitAuto (the zero value) splits when the stream requests full documents or pre-images
	// (FullDocument or FullDocumentBeforeChange set), the events that can outgrow 16 MiB, and
	// the server supports the stage (wire version 21, MongoDB 7.0, or later; asked once per
	// stream with hello when the cursor first opens).
	SplitAuto SplitMode = iota
	// SplitOn always appends the stage; a server without it refuses the cursor, a terminal
	// failure.
	SplitOn
	// SplitOff never appends it.
	SplitOff
)

// String returns "SplitAuto", "SplitOn" or "SplitOff".
func (m SplitMode) String() string { return enumstr.Of(splitModeNames, m, "SplitMode") }

var splitModeNames = []string{SplitAuto: "SplitAuto", SplitOn: "SplitOn", SplitOff: "SplitOff"}

// CursorMode selects how a stream reads its change stream (Stream.Cursor). The zero value,
// CursorDefault, shares wherever a stream can share; Dedicated is the opt-out.
type CursorMode int

const (
	// CursorDefault (the zero value) is Shared for a Collection stream and Dedicated for a
	// database- or cluster-wide one. A Collection stream whose Pipeline has a stage other than
	// $match reads on a dedicated cursor too (StreamStatus.Cursor says why, the Spawn log line
	// at Info).
	CursorDefault CursorMode = iota
	// Dedicated gives the stream a change-stream cursor of its own: one server cursor, and one
	// pooled connection held by its awaiting getMore (the behaviour of releases before shared
	// cursors). Choose it to keep a stream's reads apart from the others' (its own getMore,
	// its own server-side scan).
	Dedicated
	// Shared reads the stream's events from a cursor the runtime shares among the Collection
	// streams of the same client, database and option class (FullDocument,
	// FullDocumentBeforeChange, SplitLargeEvents and Pipeline): one server cursor filtered on
	// their collections. The stream keeps its own checkpoint, dead letters, restart policy,
	// Observer events and console row. It joins by catching up on a cursor of its own, from its
	// own position, then attaches to the shared one. Only Collection streams can be Shared (a
	// database- or cluster-wide stream fails Validate); a stream whose Pipeline has a stage
	// other than $match keeps a dedicated cursor, and its Status warnings and Spawn log line
	// say why. See the README's Concepts, "Shared cursors".
	Shared
)

// String returns "Default", "Dedicated" or "Shared".
func (m CursorMode) String() string { return enumstr.Of(cursorModeNames, m, "CursorMode") }

var cursorModeNames = []string{CursorDefault: "Default", Dedicated: "Dedicated", Shared: "Shared"}

// StartPosition (Stream.StartPosition) says where a newly spawned stream starts reading: Resume
// (the default, the zero value), Latest or At. It is policy.StartPosition, which documents the
// three and how a restart of the tree treats them (it resumes from the checkpoint written since).
type StartPosition = policy.StartPosition

// Resume (the default) resumes after the saved checkpoint; with no checkpoint it captures the
// current position and persists it before consuming anything (policy.Resume).
var Resume = policy.Resume

// Latest ignores any saved checkpoint and starts from the current position, persisted before
// anything is consumed, on the first start after Spawn only (policy.Latest).
var Latest = policy.Latest

// At ignores any saved checkpoint and starts at the first event with a cluster time at or after
// t rounded down to the second, on the first start after Spawn only; t must be a non-zero time
// between 1970 and 2106 and still in the oplog (policy.At documents it).
func At(t time.Time) StartPosition { return policy.At(t) }

// HistoryLostPolicy (Stream.OnHistoryLost) says what a stream does when its saved resume
// position is no longer in the oplog: Fail, ResumeFromNow, Rebuild or RebuildFromSnapshot. The
// zero value is Fail, except for a stream with CheckpointPolicy.Ephemeral, where it is
// ResumeFromNow. Every choice other than Fail writes a durable gap record and reports
// GapRecorded: a gap is never silent. It is policy.HistoryLost, which documents it.
type HistoryLostPolicy = policy.HistoryLost

// Fail (the default, except for Ephemeral streams) stops the stream terminally with
// ErrHistoryLost until an operator acts (policy.Fail).
var Fail = policy.Fail

// ResumeFromNow records the gap and starts from the current position; the default of an
// Ephemeral stream (policy.ResumeFromNow).
var ResumeFromNow = policy.ResumeFromNow

// Rebuild records the gap, captures the current operation time T, runs fn (the user's full
// rebuild), then starts at T, so nothing written during the rebuild is missed. fn must not be nil
// (policy.Rebuild documents where it runs and what a failure does).
func Rebuild(fn func(ctx context.Context) error) HistoryLostPolicy { return policy.Rebuild(fn) }

// InvalidatePolicy (Stream.OnInvalidate) says what a collection or database stream does after an
// invalidate event (the watched collection was dropped or renamed, or its database dropped); the
// stream actor applies it. The zero value is InvalidateStop. It is policy.Invalidate.
type InvalidatePolicy = policy.Invalidate

const (
	// InvalidateStop (the default) stops the stream terminally with ErrInvalidated, reported as
	// Stopped{Crashed}. It stays down until an operator starts it (which resumes after the
	// invalidate).
	InvalidateStop = policy.InvalidateStop
	// InvalidateRestart opens a new change stream right after the invalidate (startAfter), so
	// the stream follows a re-created collection of the same name.
	InvalidateRestart = policy.InvalidateRestart
)

// optionalName adds to c the rule that value, the name in field, breaks (rule's answer), if
// any; an empty value is not checked, since it means the default for every name but a stream's.
func optionalName(c *configcheck.Errors, field, value string, rule func(string) string) {
	if value == "" {
		return
	}
	if r := rule(value); r != "" {
		c.Add(field, "%s, got %q", r, value)
	}
}

// maxStreamName is the longest stream name accepted.
const maxStreamName = 100

// streamNameRule returns "" when name is a valid stream name, or the broken rule. A name is
// 1..100 characters from [A-Za-z0-9._-] and starts with a letter or digit; it appears in
// record ids, cursor comments, actor names and log lines, so it stays plain.
func streamNameRule(name string) string {
	const rule = "must be 1-100 characters from [A-Za-z0-9._-], starting with a letter or digit"
	if name == "" || len(name) > maxStreamName {
		return rule
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		alnum := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
		if i == 0 && !alnum {
			return rule
		}
		if !alnum && ch != '.' && ch != '_' && ch != '-' {
			return rule
		}
	}
	return ""
}

// databaseNameRule returns "" when name is a valid MongoDB database name, or the broken rule.
func databaseNameRule(name string) string {
	if len(name) >= 64 {
		return "must be shorter than 64 bytes"
	}
	if strings.ContainsAny(name, "/\\. \"$*<>:|?\x00") {
		return `must not contain any of /\. "$*<>:|? or NUL`
	}
	return ""
}

// collectionNameRule returns "" when name is a valid MongoDB collection name, or the broken rule.
func collectionNameRule(name string) string {
	switch {
	case strings.ContainsAny(name, "$\x00"):
		return "must not contain '$' or NUL"
	case strings.HasPrefix(name, "system."):
		return `must not start with "system."`
	case len(name) > 255:
		return "must be at most 255 bytes"
	}
	return ""
}
