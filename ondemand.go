package watchtree

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/engine"
)

// SignalsCollection is the collection of the records' database (Config.Database, else the
// watched one) that on-demand snapshots write their watermarks to: one document per chunk boundary ({stream, instance, snapshot, chunk,
// kind: "low"|"high", at}), the audit trail of every on-demand snapshot. The stream never sees
// these writes (it watches its own collection); they only move the cluster time forward.
const SignalsCollection = engine.SignalsCollection

var (
	// ErrSnapshotRunning means Handle.Snapshot was called while an on-demand snapshot of the
	// stream is still running: a stream runs one at a time. The error names the running one.
	ErrSnapshotRunning = engine.ErrSnapshotRunning

	// ErrStreamNotRunning means the stream is not running on this instance (starting, in
	// backoff, stopped, crashed, or a SingleLeader standby): an on-demand snapshot needs the
	// live stream to order its chunks. The error names the state.
	ErrStreamNotRunning = engine.ErrStreamNotRunning
)

// SnapshotRequest asks for an on-demand snapshot (Handle.Snapshot).
type SnapshotRequest struct {
	// Filter is a query on the collection (a bson.D, bson.M, bson.Raw, a struct, or a JSON
	// string in MongoDB Extended JSON); only matching documents are read. It is ANDed with
	// Stream.Snapshot.Filter when that is set. nil or "" reads every document.
	Filter any
}

// Snapshot re-reads the stream's collection (or the documents matching req.Filter) through the
// handlers while the stream keeps running, and returns the snapshot's id at once; the
// snapshot runs in the background and StreamStatus.OnDemand follows it.
//
// The collection is read in _id order, in chunks of Stream.Snapshot.BatchSize (default 1000).
// Each chunk is bracketed by a low and a high watermark written to SignalsCollection: the
// rows whose _id a live event changed between the two watermarks are dropped (the live event
// is newer, the stream stays authoritative); the others reach the handlers as snapshot events
// (OnSnapshot, else OnChange; ID namespace + _id + snapshot id) at the point the stream reached
// the high watermark, before any later change of the same document. They go through the lanes,
// retries and dead letters like every event; they never move the resume token.
//
// Errors: ErrSnapshotRunning while one runs, ErrStreamNotRunning unless the stream is running
// here, a *ConfigError naming SnapshotRequest.Filter for a filter that does not encode to a
// document or that the server refuses. A restart or stop of the stream abandons a running
// on-demand snapshot (its status says "abandoned"); call Snapshot again to re-run it.
func (h *Handle) Snapshot(ctx context.Context, req SnapshotRequest) (string, error) {
	name := h.e.Name()
	if h.e.Spec().Collection == "" {
		return "", fmt.Errorf("watchtree: stream %q: an on-demand snapshot reads one collection; this stream watches a database or the cluster", name)
	}
	filter, err := snapshotRequestFilter(req.Filter)
	if err != nil {
		return "", &ConfigError{Stream: name, Field: "SnapshotRequest.Filter", Rule: err.Error()}
	}
	return h.e.Snapshot(ctx, filter)
}

// snapshotRequestFilter encodes f as a BSON document; nil means every document.
func snapshotRequestFilter(f any) (bson.Raw, error) {
	switch v := f.(type) {
	case nil:
		return nil, nil
	case string:
		if v == "" {
			return nil, nil
		}
		var raw bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(v), false, &raw); err != nil {
			return nil, fmt.Errorf("must be a JSON document, got %q: %v", v, err)
		}
		return raw, nil
	case bson.Raw:
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("is not a valid BSON document: %v", err)
		}
		return v, nil
	}
	raw, err := bson.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("must encode to a BSON document, got %T: %v", f, err)
	}
	return raw, nil
}
