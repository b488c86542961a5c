package mongostore

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// checkpointDoc is a _wt_checkpoints document.
type checkpointDoc struct {
	Stream      string         `bson:"_id"`
	Token       bson.Raw       `bson:"token,omitempty"`
	ClusterTime bson.Timestamp `bson:"clusterTime,omitempty"` // an empty timestamp would be replaced by the server's on insert
	Source      string         `bson:"source"`
	Epoch       int64          `bson:"epoch"`
	Owner       string         `bson:"owner"`
	Settled     int64          `bson:"settled"`
	UpdatedAt   time.Time      `bson:"updatedAt"`
}

func toCheckpointDoc(cp store.Checkpoint) checkpointDoc {
	return checkpointDoc{
		Stream: cp.Stream, Token: cp.Token, ClusterTime: cp.ClusterTime, Source: cp.Source,
		Epoch: cp.Epoch, Owner: cp.Owner, Settled: int64(cp.Settled), UpdatedAt: cp.UpdatedAt,
	}
}

func (d checkpointDoc) record() store.Checkpoint {
	return store.Checkpoint{
		Stream: d.Stream, Token: d.Token, ClusterTime: d.ClusterTime, Source: d.Source,
		Epoch: d.Epoch, Owner: d.Owner, Settled: uint64(d.Settled), UpdatedAt: d.UpdatedAt,
	}.Clone()
}

// gapDoc is a _wt_gaps document.
type gapDoc struct {
	ID        string         `bson:"_id"`
	Stream    string         `bson:"stream"`
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
		ID: g.ID, Stream: g.Stream, FromToken: g.FromToken, FromTime: g.FromTime,
		ToToken: g.ToToken, ToTime: g.ToTime, Policy: g.Policy, Reason: g.Reason, At: g.At,
	}
}

func (d gapDoc) record() store.Gap {
	return store.Gap{
		ID: d.ID, Stream: d.Stream, FromToken: d.FromToken, FromTime: d.FromTime,
		ToToken: d.ToToken, ToTime: d.ToTime, Policy: d.Policy, Reason: d.Reason, At: d.At,
	}.Clone()
}

// deadLetterKey is the _id of a dead letter: the stream and the event ID. A compound _id (not
// a unique index on two fields) makes the key unique without any index having been created,
// and an upsert by _id never races into a duplicate. Field order is fixed by the struct, so
// equality filters on _id match what was written.
type deadLetterKey struct {
	Stream string `bson:"stream"`
	ID     string `bson:"id"`
}

// deadLetterDoc is a _wt_dead_letters document. stream repeats _id.stream for the listing
// index {stream: 1, createdAt: 1}.
type deadLetterDoc struct {
	Key            deadLetterKey `bson:"_id"`
	Stream         string        `bson:"stream"`
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
		Key: deadLetterKey{Stream: dl.Stream, ID: dl.ID}, Stream: dl.Stream, Token: dl.Token, OperationType: dl.OperationType,
		DocumentKey: dl.DocumentKey, Namespace: dl.Namespace, Event: dl.Event, EventOmitted: dl.EventOmitted,
		Error: dl.Error, ErrorType: dl.ErrorType, Stack: dl.Stack, Attempts: int64(dl.Attempts),
		FirstAttemptAt: dl.FirstAttemptAt, LastAttemptAt: dl.LastAttemptAt,
		CreatedAt: dl.CreatedAt, ExpiresAt: dl.ExpiresAt,
		ReplayCount: int64(dl.ReplayCount), LastReplayAt: dl.LastReplayAt,
	}
}

func (d deadLetterDoc) record() store.DeadLetter {
	return store.DeadLetter{
		ID: d.Key.ID, Stream: d.Key.Stream, Token: d.Token, OperationType: d.OperationType,
		DocumentKey: d.DocumentKey, Namespace: d.Namespace, Event: d.Event, EventOmitted: d.EventOmitted,
		Error: d.Error, ErrorType: d.ErrorType, Stack: d.Stack, Attempts: int(d.Attempts),
		FirstAttemptAt: d.FirstAttemptAt, LastAttemptAt: d.LastAttemptAt,
		CreatedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt,
		ReplayCount: int(d.ReplayCount), LastReplayAt: d.LastReplayAt,
	}.Clone()
}
