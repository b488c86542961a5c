package mongostore

import (
	"cmp"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// checkpointKey is the _id of an instance's own checkpoint (AllInstances). A compound _id
// can never equal the string _id of a stream's shared checkpoint, so the two layouts live side
// by side in one collection; field order is fixed by the struct, so equality filters on _id
// match what was written.
type checkpointKey struct {
	Stream   string `bson:"stream"`
	Instance string `bson:"instance"`
}

// checkpointID is the _id of scope's checkpoint: the stream name for the shared scope (the
// layout of earlier versions, kept so their documents stay readable), {stream, instance} for
// an instance's own.
func checkpointID(scope store.Scope) any {
	if scope.Shared() {
		return scope.Stream
	}
	return checkpointKey{Stream: scope.Stream, Instance: scope.Instance}
}

// checkpointDoc is a _wt_checkpoints document. stream and instance repeat the compound _id of
// an instance's checkpoint for the listing index {stream: 1, instance: 1}; the shared
// checkpoint has neither (its _id is the stream name), as in earlier versions.
type checkpointDoc struct {
	ID          any            `bson:"_id"`
	Stream      string         `bson:"stream,omitempty"`
	Instance    string         `bson:"instance,omitempty"`
	Token       bson.Raw       `bson:"token,omitempty"`
	ClusterTime bson.Timestamp `bson:"clusterTime,omitempty"` // an empty timestamp would be replaced by the server's on insert
	Source      string         `bson:"source"`
	Epoch       int64          `bson:"epoch"`
	Owner       string         `bson:"owner"`
	Settled     int64          `bson:"settled"`
	UpdatedAt   time.Time      `bson:"updatedAt"`
	ExpiresAt   time.Time      `bson:"expiresAt,omitempty"` // absent = never expires (the TTL index skips it)
}

func toCheckpointDoc(cp store.Checkpoint) checkpointDoc {
	d := checkpointDoc{
		ID: checkpointID(cp.Scope()), Token: cp.Token, ClusterTime: cp.ClusterTime, Source: cp.Source,
		Epoch: cp.Epoch, Owner: cp.Owner, Settled: int64(cp.Settled), UpdatedAt: cp.UpdatedAt, ExpiresAt: cp.ExpiresAt,
	}
	if !cp.Scope().Shared() {
		d.Stream, d.Instance = cp.Stream, cp.Instance
	}
	return d
}

func (d checkpointDoc) record() store.Checkpoint {
	cp := store.Checkpoint{
		Stream: d.Stream, Instance: d.Instance, Token: d.Token, ClusterTime: d.ClusterTime, Source: d.Source,
		Epoch: d.Epoch, Owner: d.Owner, Settled: uint64(d.Settled), UpdatedAt: d.UpdatedAt, ExpiresAt: d.ExpiresAt,
	}
	if id, ok := d.ID.(string); ok { // the shared checkpoint: _id is the stream name
		cp.Stream, cp.Instance = id, ""
	}
	return cp.Clone()
}

// gapDoc is a _wt_gaps document.
type gapDoc struct {
	ID        string         `bson:"_id"`
	Stream    string         `bson:"stream"`
	Instance  string         `bson:"instance,omitempty"` // absent for the shared scope
	FromToken bson.Raw       `bson:"fromToken,omitempty"`
	FromTime  bson.Timestamp `bson:"fromTime,omitempty"`
	ToToken   bson.Raw       `bson:"toToken,omitempty"`
	ToTime    bson.Timestamp `bson:"toTime,omitempty"`
	Policy    string         `bson:"policy"`
	Reason    string         `bson:"reason"`
	At        time.Time      `bson:"at"`
}

func toGapDoc(g store.Gap) gapDoc {
	return gapDoc{
		ID: g.ID, Stream: g.Stream, Instance: g.Instance, FromToken: g.FromToken, FromTime: g.FromTime,
		ToToken: g.ToToken, ToTime: g.ToTime, Policy: g.Policy, Reason: g.Reason, At: g.At,
	}
}

func (d gapDoc) record() store.Gap {
	return store.Gap{
		ID: d.ID, Stream: d.Stream, Instance: d.Instance, FromToken: d.FromToken, FromTime: d.FromTime,
		ToToken: d.ToToken, ToTime: d.ToTime, Policy: d.Policy, Reason: d.Reason, At: d.At,
	}.Clone()
}

// deadLetterKey is the _id of a dead letter: the stream, the instance (left out for the shared
// scope, which is the layout of earlier versions, so their records keep their _id) and the
// event ID. A compound _id (not a unique index on several fields) makes the key unique without
// any index having been created, and an upsert by _id never races into a duplicate. Field
// order is fixed by the struct, so equality filters on _id match what was written.
type deadLetterKey struct {
	Stream   string `bson:"stream"`
	Instance string `bson:"instance,omitempty"`
	ID       string `bson:"id"`
}

// deadLetterDoc is a _wt_dead_letters document. stream and instance repeat the _id's for the
// listing index {stream: 1, instance: 1, createdAt: 1}.
type deadLetterDoc struct {
	Key            deadLetterKey `bson:"_id"`
	Stream         string        `bson:"stream"`
	Instance       string        `bson:"instance,omitempty"`
	Token          bson.Raw      `bson:"token,omitempty"`
	OperationType  string        `bson:"operationType"`
	DocumentKey    bson.Raw      `bson:"documentKey,omitempty"`
	Namespace      string        `bson:"namespace,omitempty"`
	Event          bson.Raw      `bson:"event,omitempty"`
	EventOmitted   bool          `bson:"eventOmitted,omitempty"`
	Error          string        `bson:"error"`
	ErrorType      string        `bson:"errorType,omitempty"`
	Stack          string        `bson:"stack,omitempty"`
	Attempts       int64         `bson:"attempts"`
	FirstAttemptAt time.Time     `bson:"firstAttemptAt,omitempty"`
	LastAttemptAt  time.Time     `bson:"lastAttemptAt,omitempty"`
	CreatedAt      time.Time     `bson:"createdAt"`
	ExpiresAt      time.Time     `bson:"expiresAt,omitempty"` // absent = never expires (the TTL index skips it)
	ReplayCount    int64         `bson:"replayCount"`
	LastReplayAt   time.Time     `bson:"lastReplayAt,omitempty"`
}

func toDeadLetterDoc(dl store.DeadLetter) deadLetterDoc {
	return deadLetterDoc{
		Key: deadLetterKey{Stream: dl.Stream, Instance: dl.Instance, ID: dl.ID}, Stream: dl.Stream, Instance: dl.Instance, Token: dl.Token, OperationType: dl.OperationType,
		DocumentKey: dl.DocumentKey, Namespace: dl.Namespace, Event: dl.Event, EventOmitted: dl.EventOmitted,
		Error: dl.Error, ErrorType: dl.ErrorType, Stack: dl.Stack, Attempts: int64(dl.Attempts),
		FirstAttemptAt: dl.FirstAttemptAt, LastAttemptAt: dl.LastAttemptAt,
		CreatedAt: dl.CreatedAt, ExpiresAt: dl.ExpiresAt,
		ReplayCount: int64(dl.ReplayCount), LastReplayAt: dl.LastReplayAt,
	}
}

func (d deadLetterDoc) record() store.DeadLetter {
	return store.DeadLetter{
		ID: d.Key.ID, Stream: d.Key.Stream, Instance: d.Key.Instance, Token: d.Token, OperationType: d.OperationType,
		DocumentKey: d.DocumentKey, Namespace: d.Namespace, Event: d.Event, EventOmitted: d.EventOmitted,
		Error: d.Error, ErrorType: d.ErrorType, Stack: d.Stack, Attempts: int(d.Attempts),
		FirstAttemptAt: d.FirstAttemptAt, LastAttemptAt: d.LastAttemptAt,
		CreatedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt,
		ReplayCount: int(d.ReplayCount), LastReplayAt: d.LastReplayAt,
	}.Clone()
}

// sortCheckpoints orders a stream's checkpoints: the shared one first, then by instance.
func sortCheckpoints(cps []store.Checkpoint) {
	slices.SortFunc(cps, func(a, b store.Checkpoint) int { return cmp.Compare(a.Instance, b.Instance) })
}
