package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/rawbson"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store"
)

// Exactly once into MongoDB (Stream.Transactional).
//
// A transactional stream runs each handler call in a transaction on Config.Client, whose
// context carries the session: the driver's operations made with that context join it. The
// transaction, in order:
//  1. for a SingleLeader stream, updates the lane's fence document on the condition that its
//     epoch is this term's. No match means a newer leader raised the fences: the transaction
//     is aborted, the supervisor is told (wire.Fenced) and the event stays unsettled.
//  2. inserts the event's applied record into AppliedCollection, keyed by the stream's records
//     scope and the event ID. A duplicate key means an earlier transaction committed the event:
//     the transaction is aborted and the event settles as skipped ("already applied").
//  3. runs the handler;
//  4. commits, with write concern majority.
// A new leader raises every fence document of the stream to its epoch before its first
// transaction (raiseFences). A deposed leader's transaction then matches no fence, or meets a
// write conflict with the raise, and never commits; one that committed first is seen by the
// new leader's applied-record insert. So the handler's writes land once whatever the crash
// point, the lane count, or a change of it between terms (fences are per lane, so lanes never
// conflict with each other; the raise covers every lane document the stream ever had).
// A batch (TxBatch, runBatch) is one such transaction for several events of a lane: it reads
// which records exist, inserts the others' at once, and runs their handlers in order.
//
// A dead letter is written the same way: the applied record, the fence and the dead letter
// (with the default MongoDB dead-letter store, in the same transaction; with a store of the
// user's, written first, then the record: the dead letter is idempotent by event ID).
//
// The applied records at or before the checkpoint are purged after the checkpoint writes, at
// most once per purgeEvery (appliedPurger). Snapshot events have no cluster time: their records
// expire after the dead-letter retention instead (a TTL index on expireAt).

const (
	// AppliedCollection holds the applied records, in the records' database.
	AppliedCollection = "_wt_applied"
	// FenceCollection holds the per-lane fence documents of SingleLeader transactional streams.
	FenceCollection = "_wt_fences"
	// purgeEvery is the shortest time between two purges of a stream's applied records.
	purgeEvery = 10 * time.Second
	// commitRetries bounds the retries of commitTransaction after an
	// UnknownTransactionCommitResult within one attempt; the next attempt's applied-record
	// insert tells whether the commit landed.
	commitRetries = 2
)

// errAlreadyApplied is the error of a transactional handler call whose event an earlier
// transaction committed: the event settles as skipped with the detail alreadyAppliedDetail.
var errAlreadyApplied = errors.New("watchtree: the event was applied already (its applied record exists)")

const alreadyAppliedDetail = "already applied"

// errTxnFenced is the error of a transaction refused by a newer leader's fence.
var errTxnFenced = errors.New("fenced by a newer leader")

// txnRecords keeps the applied records and fences of one transactional stream.
type txnRecords struct {
	client  *mongo.Client
	applied *mongo.Collection
	fences  *mongo.Collection
	scope   store.Scope
	lanes   int
	leader  bool // SingleLeader: fence the transactions
	epoch   func() int64
	fence   func(*wire.Fenced) // tells the supervisor a transaction was fenced
	ttl     time.Duration      // the expiry of snapshot events' records (the dead-letter retention)
	timeout time.Duration      // bounds each operation outside the handler (Config.ConnectTimeout)
	clk     clock.Clock
	log     *zap.Logger
	batch   TxBatch // defaulted; MaxEvents 1: a transaction per event

	// sessions holds one session per lane, made by prepare, each used by its lane's
	// transactions one after the other (under its mutex: a lane of a stopping dispatcher may
	// still finish while the next one starts). A lane's session ID is in its fence document,
	// so that a new leader can end the transactions a crashed leader left open (raiseFences).
	sessions []laneSession
	raiseMu  sync.Mutex // one raise at a time

	mu      sync.Mutex
	ready   bool  // collections, indexes and sessions exist
	closed  bool  // close was called: no new session
	raised  int64 // the epoch whose fences are raised
	purging bool
	purged  time.Time // the last purge's start (clock)
}

type laneSession struct {
	mu   sync.Mutex
	sess *mongo.Session
}

// appliedKey is the _id of an applied record.
type appliedKey struct {
	Stream   string `bson:"s"`
	Instance string `bson:"i"`
	ID       string `bson:"e"`
}

// fenceID is the _id of a lane's fence document.
func (r *txnRecords) fenceID(lane int) string {
	return r.scope.Stream + "/" + strconv.Itoa(lane)
}

// prepare creates the collections and the indexes once (outside any transaction: a
// transaction that creates a collection conflicts with every other one creating it), and the
// lanes' sessions.
func (r *txnRecords) prepare(ctx context.Context) error {
	r.mu.Lock()
	ready, closed := r.ready, r.closed
	r.mu.Unlock()
	if closed {
		return errors.New("the stream is shutting down")
	}
	if ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	db := r.applied.Database()
	for _, name := range []string{AppliedCollection, FenceCollection} {
		err := db.CreateCollection(ctx, name)
		var ce mongo.CommandError
		if err != nil && !(errors.As(err, &ce) && ce.Code == 48) { // NamespaceExists
			return fmt.Errorf("create %s.%s: %w", db.Name(), name, err)
		}
	}
	_, err := r.applied.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "_id.s", Value: 1}, {Key: "_id.i", Value: 1}, {Key: "ts", Value: 1}}, Options: options.Index().SetName("wt_applied_purge")},
		{Keys: bson.D{{Key: "expireAt", Value: 1}}, Options: options.Index().SetName("wt_applied_ttl").SetExpireAfterSeconds(0)},
	})
	if err != nil {
		return fmt.Errorf("create the indexes of %s.%s: %w", db.Name(), AppliedCollection, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready || r.closed {
		return nil
	}
	r.sessions = make([]laneSession, r.lanes)
	for i := range r.sessions {
		sess, err := r.client.StartSession()
		if err != nil {
			for j := range i {
				r.sessions[j].sess.EndSession(ctx)
			}
			r.sessions = nil
			return fmt.Errorf("start a session: %w", err)
		}
		r.sessions[i].sess = sess
	}
	r.ready = true
	return nil
}

// close ends the lanes' sessions once the stream's tree has stopped.
func (r *txnRecords) close(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	sessions := r.sessions
	r.sessions, r.ready = nil, false
	r.mu.Unlock()
	for i := range sessions {
		sessions[i].mu.Lock()
		sessions[i].sess.EndSession(ctx)
		sessions[i].mu.Unlock()
	}
}

// raiseFences sets every fence document of the stream to this term's epoch (never lowering a
// newer one) and writes its lanes' documents (with their session IDs), once per epoch, before
// the term's first transaction. It runs outside any transaction. An older term's transaction
// still open on a fence document would hold the raise up: a crashed process's until the server's
// transactionLifetimeLimitSeconds (60 s by default). So the raise first kills the sessions named
// in the older fence documents (killSessions), which aborts their transactions; a deposed
// leader that is still alive then fails its commit and finds itself fenced.
func (r *txnRecords) raiseFences(ctx context.Context, epoch int64) error {
	r.raiseMu.Lock()
	defer r.raiseMu.Unlock()
	r.mu.Lock()
	done := r.raised >= epoch
	r.mu.Unlock()
	if done {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	older := bson.D{{Key: "stream", Value: r.scope.Stream}, {Key: "epoch", Value: bson.D{{Key: "$lt", Value: epoch}}}}
	var stale []struct {
		LSID bson.Raw `bson:"lsid"`
	}
	cur, err := r.fences.Find(ctx, older, options.Find().SetProjection(bson.D{{Key: "lsid", Value: 1}}))
	if err == nil {
		err = cur.All(ctx, &stale)
	}
	if err != nil {
		return fmt.Errorf("read the fences: %w", err)
	}
	var kill bson.A
	for _, f := range stale {
		if len(f.LSID) > 0 {
			kill = append(kill, f.LSID)
		}
	}
	if len(kill) > 0 {
		if err := r.client.Database("admin").RunCommand(ctx, bson.D{{Key: "killSessions", Value: kill}}).Err(); err != nil {
			// Without the privilege (killAnySession) the raise waits for the server to abort them.
			r.log.Warn("killSessions of the older term's lanes failed; the fences are raised once their transactions end", zap.Error(err))
		}
	}
	if _, err := r.fences.UpdateMany(ctx, older, bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: epoch}}}}); err != nil {
		return fmt.Errorf("raise the fences to epoch %d: %w", epoch, err)
	}
	r.mu.Lock()
	sessions := r.sessions
	r.mu.Unlock()
	models := make([]mongo.WriteModel, 0, len(sessions))
	for lane := range sessions {
		models = append(models, mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: r.fenceID(lane)}, {Key: "epoch", Value: bson.D{{Key: "$lte", Value: epoch}}}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "stream", Value: r.scope.Stream}, {Key: "lane", Value: lane},
				{Key: "epoch", Value: epoch}, {Key: "lsid", Value: sessions[lane].sess.ID()}}}}).
			SetUpsert(true))
	}
	// A duplicate key: a newer term's document (the filter did not match it, the upsert's insert
	// collided); this term's transactions on that lane will be fenced.
	if _, err := r.fences.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("write the lane fences at epoch %d: %w", epoch, err)
	}
	r.mu.Lock()
	if epoch > r.raised {
		r.raised = epoch
	}
	r.mu.Unlock()
	return nil
}

// txnEvent is what a transaction needs to know of its event.
type txnEvent struct {
	id   string
	ts   bson.Timestamp // zero for snapshot events
	lane int
	// deadLetter: the transaction writes the event's dead letter; its record is marked dl, so
	// that a replay of the dead letter may apply it once.
	deadLetter bool
	// replay: a replay of the event's dead letter (Runtime.Replay). It claims the record marked
	// dl (or inserts it, when it was purged): a second replay finds it applied. It takes no
	// fence: the record alone orders it with the stream's own transactions, and a standby
	// may replay.
	replay bool
}

func (r *txnRecords) eventOf(raw []byte) txnEvent {
	ev := txnEvent{id: dispatcher.EventID(raw), lane: dispatcher.LaneOf(raw, r.lanes)}
	if el, ok := rawbson.Lookup(raw, "clusterTime"); ok && el.Type == bsoncore.TypeTimestamp {
		t, i, _, _ := bsoncore.ReadTimestamp(el.Value)
		ev.ts = bson.Timestamp{T: t, I: i}
	}
	return ev
}

// run runs body in a transaction with the event's applied record (claim) and, for a
// SingleLeader stream, its lane's fence, and commits. body gets the context bound to the
// session. Errors: errAlreadyApplied, errTxnFenced (wrapped), the driver's transaction errors
// (with their labels), body's error as returned.
func (r *txnRecords) run(ctx context.Context, ev txnEvent, body func(ctx context.Context) error) error {
	return r.inTxn(ctx, ev.lane, r.leader && !ev.replay, ev.id, func(sctx context.Context) error {
		if err := r.claim(sctx, ev); err != nil {
			return err
		}
		return body(sctx)
	})
}

// runBatch runs evs, consecutive events of one lane, in one transaction: the events whose
// applied records exist settle skipped (out), each other one claims its record and runs
// call(sctx, i), in order, until the batch's time bound (TxBatch.MaxDuration, checked before
// each event but the first) closes it early. It returns how many of evs completed (all of them
// committed), or an error: none did.
func (r *txnRecords) runBatch(ctx context.Context, evs []txnEvent, call func(sctx context.Context, i int) error,
	out []dispatcher.BatchOutcome) (int, error) {
	n := 0
	err := r.inTxn(ctx, evs[0].lane, r.leader, evs[len(evs)-1].id, func(sctx context.Context) error {
		// The records that exist, read first: a duplicate key inside a transaction aborts it.
		keys := make(bson.A, len(evs))
		for i, ev := range evs {
			keys[i] = appliedKey{Stream: r.scope.Stream, Instance: r.scope.Instance, ID: ev.id}
		}
		cur, err := r.applied.Find(sctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}},
			options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return fmt.Errorf("read the applied records: %w", err)
		}
		var found []struct {
			ID appliedKey `bson:"_id"`
		}
		if err := cur.All(sctx, &found); err != nil {
			return fmt.Errorf("read the applied records: %w", err)
		}
		applied := make(map[string]bool, len(found))
		for _, f := range found {
			applied[f.ID.ID] = true
		}
		// The records of the events to run, in one statement (a round trip per event would be
		// most of a batch's cost); those of events a closed batch did not reach are deleted
		// again before the commit.
		now := r.clk.Now().UTC()
		var recs []any
		for i, ev := range evs {
			if !applied[ev.id] {
				recs = append(recs, r.record(ev, keys[i].(appliedKey), now))
			}
		}
		if len(recs) > 0 {
			if _, err := r.applied.InsertMany(sctx, recs); err != nil {
				return fmt.Errorf("insert the applied records: %w", err)
			}
		}
		start := clock.Mono(r.clk)
		for i, ev := range evs {
			if i > 0 && clock.Mono(r.clk)-start >= r.batch.MaxDuration {
				break
			}
			out[i] = dispatcher.BatchOutcome{}
			if applied[ev.id] {
				out[i] = dispatcher.BatchOutcome{Skipped: true, Detail: alreadyAppliedDetail}
			} else if err := call(sctx, i); err != nil {
				return err
			}
			n = i + 1
		}
		var unreached bson.A
		for i := n; i < len(evs); i++ {
			if !applied[evs[i].id] {
				unreached = append(unreached, keys[i])
			}
		}
		if len(unreached) > 0 {
			if _, err := r.applied.DeleteMany(sctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: unreached}}}}); err != nil {
				return fmt.Errorf("delete the records of the events the batch did not reach: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// inTxn runs body in a transaction on the lane's session, after the lane's fence when fenced
// (SingleLeader; last is recorded in it), and commits with write concern majority.
func (r *txnRecords) inTxn(ctx context.Context, lane int, fenced bool, last string, body func(sctx context.Context) error) error {
	if err := r.prepare(ctx); err != nil {
		return err
	}
	var epoch int64
	if fenced {
		epoch = r.epoch()
		if err := r.raiseFences(ctx, epoch); err != nil {
			return err
		}
	}
	r.mu.Lock()
	if r.closed || lane >= len(r.sessions) {
		r.mu.Unlock()
		return errors.New("the stream is shutting down")
	}
	ls := &r.sessions[lane]
	r.mu.Unlock()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	sess := ls.sess
	// Majority: a checkpoint passes the event once the transaction is durable. Snapshot reads:
	// the handler reads one point in time, whatever it reads.
	if err := sess.StartTransaction(options.Transaction().
		SetReadConcern(readconcern.Snapshot()).SetWriteConcern(writeconcern.Majority())); err != nil {
		return fmt.Errorf("start a transaction: %w", err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	committed := false
	defer func() {
		if !committed {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
			_ = sess.AbortTransaction(actx) // best effort: an aborted or expired one is gone anyway
			cancel()
		}
	}()
	if fenced {
		res, err := r.fences.UpdateOne(sctx, bson.D{{Key: "_id", Value: r.fenceID(lane)}, {Key: "epoch", Value: epoch}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: last}}}})
		if err != nil {
			return fmt.Errorf("check the fence of lane %d: %w", lane, err)
		}
		if res.MatchedCount == 0 {
			why := fmt.Sprintf("transaction under epoch %d refused: the fence of lane %d is at a newer epoch", epoch, lane)
			r.fence(&wire.Fenced{Epoch: epoch, Why: why})
			return fmt.Errorf("%s: %w: %w", why, errTxnFenced, store.ErrFenced)
		}
	}
	if err := body(sctx); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	var err error
	for try := 0; ; try++ {
		err = sess.CommitTransaction(cctx)
		if err == nil || !hasLabel(err, "UnknownTransactionCommitResult") || try == commitRetries || cctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
}

// tooLarge reports whether err says the transaction was too large: TransactionTooLargeForCache
// (313), TransactionTooLarge (334) or BSONObjectTooLarge (10334). A batch then splits.
func tooLarge(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && (se.HasErrorCode(313) || se.HasErrorCode(334) || se.HasErrorCode(10334))
}

// claim writes the event's applied record in the transaction of sctx: errAlreadyApplied when
// it exists (for a replay: exists and is not a dead letter's).
func (r *txnRecords) claim(sctx context.Context, ev txnEvent) error {
	key := appliedKey{Stream: r.scope.Stream, Instance: r.scope.Instance, ID: ev.id}
	now := r.clk.Now().UTC()
	if ev.replay {
		res, err := r.applied.UpdateOne(sctx, bson.D{{Key: "_id", Value: key}, {Key: "dl", Value: true}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "dl", Value: ""}}}, {Key: "$set", Value: bson.D{{Key: "replayedAt", Value: now}}}})
		if err != nil {
			return fmt.Errorf("claim the dead letter's applied record: %w", err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
	}
	if _, err := r.applied.InsertOne(sctx, r.record(ev, key, now)); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return errAlreadyApplied
		}
		return fmt.Errorf("insert the applied record: %w", err)
	}
	return nil
}

// record is the applied record of ev.
func (r *txnRecords) record(ev txnEvent, key appliedKey, now time.Time) bson.D {
	rec := bson.D{{Key: "_id", Value: key}, {Key: "ts", Value: ev.ts}, {Key: "at", Value: now}}
	if ev.deadLetter {
		rec = append(rec, bson.E{Key: "dl", Value: true})
	}
	if ev.ts.IsZero() {
		rec = append(rec, bson.E{Key: "expireAt", Value: now.Add(r.ttl)})
	}
	return rec
}

// hasLabel reports whether err carries the server's or the driver's error label.
func hasLabel(err error, label string) bool {
	var le mongo.LabeledError
	return errors.As(err, &le) && le.HasErrorLabel(label)
}

// purgeAfter deletes the applied records of events before the saved checkpoint cp: those with
// a cluster time before cp's (events at cp's own cluster time are kept: a transaction's events
// share one). At most once per purgeEvery; on the caller's goroutine (the checkpointer's
// writer); a failure is logged and the next checkpoint tries again.
func (r *txnRecords) purgeAfter(ctx context.Context, cp store.Checkpoint) {
	if cp.ClusterTime.IsZero() {
		return
	}
	now := r.clk.Now()
	r.mu.Lock()
	if r.purging || (!r.purged.IsZero() && now.Sub(r.purged) < purgeEvery) || !r.ready {
		r.mu.Unlock()
		return
	}
	r.purging, r.purged = true, now
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.purging = false
		r.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := r.applied.DeleteMany(ctx, bson.D{{Key: "_id.s", Value: r.scope.Stream}, {Key: "_id.i", Value: r.scope.Instance},
		{Key: "ts", Value: bson.D{{Key: "$gt", Value: bson.Timestamp{}}, {Key: "$lt", Value: cp.ClusterTime}}}})
	if err != nil {
		r.log.Warn("purge of the applied records failed; the next checkpoint tries again", zap.Error(err))
		return
	}
	if res.DeletedCount > 0 {
		r.log.Debug("applied records purged", zap.Int64("deleted", res.DeletedCount))
	}
}

// txnRouter runs the handler calls of a transactional stream in transactions (txnRecords.run).
type txnRouter struct {
	dispatcher.Router
	rec    *txnRecords
	replay bool // the router of Runtime.Replay
}

func (t txnRouter) Route(raw bson.Raw) (dispatcher.Invocation, messages.Outcome, error) {
	inv, outcome, err := t.Router.Route(raw)
	if inv == nil || err != nil {
		return inv, outcome, err
	}
	ev := t.rec.eventOf(raw)
	ev.replay = t.replay
	return &txnInvocation{inv: inv, rec: t.rec, ev: ev}, outcome, nil
}

// Classify: an event applied already settles as skipped; a handler write through another
// client is the handler's bug, permanent (every attempt would fail the same way); the rest is
// the stream's (a transaction error is retryable: Retryable is the default class).
func (t txnRouter) Classify(err error) (dispatcher.ErrorClass, string) {
	switch {
	case errors.Is(err, errAlreadyApplied):
		return dispatcher.Skipped, alreadyAppliedDetail
	case errors.Is(err, mongo.ErrWrongClient):
		return dispatcher.Permanent, ""
	}
	return t.Router.Classify(err)
}

// BatchLimits implements dispatcher.Batcher: TxBatch's bounds (MaxEvents 1: off).
func (t txnRouter) BatchLimits() (int, int) {
	if t.replay {
		return 1, 0
	}
	return t.rec.batch.MaxEvents, t.rec.batch.MaxBytes
}

// CallBatch implements dispatcher.Batcher: runBatch of the invocations' events. A transaction
// too large splits.
func (t txnRouter) CallBatch(ctx context.Context, invs []dispatcher.Invocation, out []dispatcher.BatchOutcome) (int, bool, error) {
	evs := make([]txnEvent, len(invs))
	inner := make([]dispatcher.Invocation, len(invs))
	for i, inv := range invs {
		ti, ok := inv.(*txnInvocation)
		if !ok { // unreachable: the dispatcher batches what this router's Route returned
			return 0, false, fmt.Errorf("watchtree: batch of a foreign invocation %T", inv)
		}
		evs[i], inner[i] = ti.ev, ti.inv
	}
	n, err := t.rec.runBatch(ctx, evs, func(sctx context.Context, i int) error { return inner[i].Call(sctx, 1) }, out)
	err = t.rec.explainWrongClient(err)
	return n, tooLarge(err), err
}

// explainWrongClient names the rule a handler broke when the driver refused the transaction's
// session (a write through a client other than Config.Client); other errors pass unchanged.
func (r *txnRecords) explainWrongClient(err error) error {
	if !errors.Is(err, mongo.ErrWrongClient) {
		return err
	}
	return fmt.Errorf("watchtree: Transactional stream %q: the handler wrote through a client other than Config.Client, outside the event's transaction (use Config.Client and the handler's ctx): %w", r.scope.Stream, err)
}

type txnInvocation struct {
	inv dispatcher.Invocation
	rec *txnRecords
	ev  txnEvent
}

func (t *txnInvocation) Release() {
	if r, ok := t.inv.(dispatcher.Releaser); ok {
		r.Release()
	}
}

func (t *txnInvocation) Call(ctx context.Context, attempt int) error {
	return t.rec.explainWrongClient(t.rec.run(ctx, t.ev, func(sctx context.Context) error { return t.inv.Call(sctx, attempt) }))
}

// txnDeadLetters writes a transactional stream's dead letters with their applied records.
type txnDeadLetters struct {
	dispatcher.DeadLetterWriter
	rec *txnRecords
	// inTxn: the writer is the default MongoDB store on the transaction's client, so the dead
	// letter joins the transaction; false: it is written first, then the record commits.
	inTxn bool
}

func (d txnDeadLetters) PutDeadLetter(ctx context.Context, dl store.DeadLetter) error {
	ev := d.rec.eventOf(dl.Event)
	ev.id, ev.deadLetter = dl.ID, true
	if !d.inTxn {
		if err := d.DeadLetterWriter.PutDeadLetter(ctx, dl); err != nil {
			return err
		}
	}
	err := d.rec.run(ctx, ev, func(sctx context.Context) error {
		if d.inTxn {
			return d.DeadLetterWriter.PutDeadLetter(sctx, dl)
		}
		return nil
	})
	if errors.Is(err, errAlreadyApplied) {
		// Another term committed the event (its handler's writes, or its dead letter) while this
		// one retried it: its record stands, and this dead letter is not written.
		d.rec.log.Warn("dead letter not written: the event was applied already", zap.String("event", dl.ID))
		return nil
	}
	return err
}

// purgingCheckpoints purges a transactional stream's applied records after its checkpoint
// writes.
type purgingCheckpoints struct {
	store.CheckpointStore
	rec *txnRecords
}

func (p purgingCheckpoints) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := p.CheckpointStore.Save(ctx, cp); err != nil {
		return err
	}
	p.rec.purgeAfter(ctx, cp)
	return nil
}
