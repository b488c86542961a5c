package status

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/messages"
)

// Row is the console's row of st at now (the lag is now minus ReadThrough): the one mapping
// from the status to messages.StreamRow. The row's own names differ where the wire format
// fixed them first: last_error is LastCause, last_event_at is ReadThrough, checkpoint_token is
// Checkpoint's _data, role and lease_owner are Lease.Role and Lease.Owner, and note is the
// warnings joined by "; ". The fields a table row leaves out (the outcome counts other than
// settled and dead-lettered, SettledThrough, the lease's instance, reason and counters,
// LastStop, Snapshot and OnDemand) are in the StatusReply a describe answers with.
//
// The console adds what only it knows: the namespace, the dead-letter backlog, the rate, and
// the distances to the oplog (OplogBehind, TokenHeadroom).
func Row(st Stream, now time.Time) *messages.StreamRow {
	row := &messages.StreamRow{Name: st.Name, Mode: st.Mode, Cursor: st.Cursor,
		State: string(st.State), Why: st.Why, Since: timestamp(st.Since),
		Attempt: st.Attempt, MaxAttempts: st.MaxAttempts, NextRetryAt: timestamp(st.NextRetryAt),
		LastError: st.LastCause, InFlight: st.InFlight,
		CheckpointAt: timestamp(st.CheckpointAt), CheckpointSource: st.CheckpointSource,
		CheckpointToken: tokentime.Data(st.Checkpoint),
		Settled:         st.Settled, DeadLettered: st.DeadLettered,
		Deaths: st.Deaths, Restarts: st.Restarts, Incarnation: st.Incarnation,
		Note: strings.Join(st.Warnings, "; "),
	}
	if lag, ok := st.Lag(now); ok {
		row.LastEventAt, row.Lag = timestamp(st.ReadThrough), durationpb.New(lag)
	}
	if at, _, ok := tokentime.Of(st.Checkpoint); ok {
		row.CheckpointTime = timestamppb.New(at)
	}
	// A stream without a lease keeps no role.
	if l := st.Lease; l != nil {
		row.Role, row.LeaseOwner, row.LeaseEpoch, row.LeaseExpiresAt = l.Role, l.Owner, l.Epoch, timestamp(l.ExpiresAt)
	}
	return row
}

// timestamp is t as a protobuf timestamp, nil for the zero time (a time the status left unset).
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
