package watchtree

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Mode is the deployment mode of a stream.
type Mode int

const (
	// AllInstances (the default) runs the stream on every instance that spawns it, without
	// coordination: each sees every event. Instances share the stream's checkpoint record (the
	// latest write wins), so use it with one instance, or for idempotent per-instance work such
	// as cache invalidation.
	AllInstances Mode = iota
	// SingleLeader runs the stream on one instance at a time, elected with a lease in
	// "_wt_leases"; the others stand by and take over when the lease expires or is released.
	// Checkpoint writes are fenced by the lease epoch.
	SingleLeader
)

// String returns "AllInstances" or "SingleLeader".
func (m Mode) String() string {
	switch m {
	case AllInstances:
		return "AllInstances"
	case SingleLeader:
		return "SingleLeader"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

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

// StartPosition says where a newly spawned stream starts reading. Build it with Resume (the zero
// value), Latest or At.
//
// Latest and At apply to the first start after Spawn only: every later start of the same stream
// tree (a supervisor restart, an operator restart) resumes from the checkpoint written since, so
// a restart never skips events. A saved checkpoint that Latest or At discards is logged at WARN.
type StartPosition struct {
	kind startKind
	at   time.Time
}

type startKind uint8

const (
	startResume startKind = iota
	startLatest
	startAt
)

// Resume (the default) resumes after the saved checkpoint; with no checkpoint it captures the
// current position and persists it before consuming anything. See OnHistoryLost for a saved
// position that is no longer in the oplog.
var Resume = StartPosition{}

// Latest ignores any saved checkpoint and starts from the current position.
var Latest = StartPosition{kind: startLatest}

// At ignores any saved checkpoint and starts at the first event with a cluster time at or after
// t rounded down to the second (startAtOperationTime has second precision, so a few events of
// that second before t may be delivered too). t must be a non-zero time between 1970 and 2106,
// and must still be in the oplog, otherwise OnHistoryLost applies.
func At(t time.Time) StartPosition { return StartPosition{kind: startAt, at: t} }

// operationTime returns the startAtOperationTime of an At position.
func (p StartPosition) operationTime() bson.Timestamp {
	return bson.Timestamp{T: uint32(p.at.Unix())}
}

// atRule returns "" when the time of an At position is usable, or the broken rule.
func (p StartPosition) atRule() string {
	switch {
	case p.kind != startAt:
		return ""
	case p.at.IsZero():
		return "At needs a non-zero time"
	case p.at.Unix() < 0 || p.at.Unix() > math.MaxUint32:
		return "At needs a time between 1970 and 2106, got " + p.at.UTC().Format(time.RFC3339)
	}
	return ""
}

// Time returns the time given to At, and false for Resume and Latest.
func (p StartPosition) Time() (time.Time, bool) { return p.at, p.kind == startAt }

// String returns "Resume", "Latest" or "At(<RFC 3339 time>)".
func (p StartPosition) String() string {
	switch p.kind {
	case startResume:
		return "Resume"
	case startLatest:
		return "Latest"
	case startAt:
		return "At(" + p.at.UTC().Format(time.RFC3339Nano) + ")"
	}
	return fmt.Sprintf("StartPosition(%d)", p.kind)
}

// HistoryLostPolicy says what a stream does when its saved resume position is no longer in the
// oplog (ChangeStreamHistoryLost 286, ChangeStreamFatalError 280, CappedPositionLost 136). Build
// it with Fail (the zero value), ResumeFromNow or Rebuild. Every choice other than Fail writes a
// durable gap record (stream, from, to, policy, time) to "_wt_gaps" and reports GapRecorded to the
// Observer: a gap is never silent.
type HistoryLostPolicy struct {
	kind    historyLostKind
	rebuild func(ctx context.Context) error
}

type historyLostKind uint8

const (
	historyFail historyLostKind = iota
	historyResumeFromNow
	historyRebuild
)

// Fail (the default) stops the stream terminally with ErrHistoryLost and reports it. It stays
// down until an operator acts (for example deletes the checkpoint or changes the policy).
var Fail = HistoryLostPolicy{}

// ResumeFromNow records the gap and starts from the current position. Use it for rebuildable
// projections (search indexes, caches), and reconcile the gap afterwards.
var ResumeFromNow = HistoryLostPolicy{kind: historyResumeFromNow}

// Rebuild records the gap, captures the current operation time T, runs fn (the user's full
// rebuild, for example a re-scan of the collection), then starts at T, so nothing written during
// the rebuild is missed. fn runs on its own goroutine; ctx is cancelled when the stream stops.
// If fn returns an error the start fails and the RestartPolicy applies (fn runs again on the next
// attempt). fn must not be nil.
func Rebuild(fn func(ctx context.Context) error) HistoryLostPolicy {
	return HistoryLostPolicy{kind: historyRebuild, rebuild: fn}
}

// String returns "Fail", "ResumeFromNow" or "Rebuild"; gap records store it.
func (p HistoryLostPolicy) String() string {
	switch p.kind {
	case historyFail:
		return "Fail"
	case historyResumeFromNow:
		return "ResumeFromNow"
	case historyRebuild:
		return "Rebuild"
	}
	return fmt.Sprintf("HistoryLostPolicy(%d)", p.kind)
}

// InvalidatePolicy says what a collection or database stream does after an invalidate event
// (the watched collection was dropped or renamed, or its database dropped). The invalidate event
// reaches OnChange first, if set; it is never a resume position. Either path is reported to the
// Observer as Invalidated.
type InvalidatePolicy int

const (
	// InvalidateStop (the default) stops the stream terminally with ErrInvalidated, reported as
	// Stopped{Crashed}. It stays down until an operator starts it (which resumes after the
	// invalidate).
	InvalidateStop InvalidatePolicy = iota
	// InvalidateRestart opens a new change stream right after the invalidate (startAfter), so
	// the stream follows a re-created collection of the same name.
	InvalidateRestart
)

// String returns "InvalidateStop" or "InvalidateRestart".
func (p InvalidatePolicy) String() string {
	switch p {
	case InvalidateStop:
		return "InvalidateStop"
	case InvalidateRestart:
		return "InvalidateRestart"
	}
	return fmt.Sprintf("InvalidatePolicy(%d)", int(p))
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
