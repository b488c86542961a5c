package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/actors/dispatcher"
	"github.com/watchtree/watchtree/actors/stream"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/store/mongostore"
)

// defaultMaxAwaitTime is how long a change-stream getMore waits for events on the server before
// it returns an empty batch (with a fresh post-batch resume token): the stream actor's default,
// its one source.
var defaultMaxAwaitTime = stream.DefaultConfig().MaxAwaitTime

// driverWatcher opens a stream's change stream with the MongoDB driver: Collection.Watch,
// Database.Watch or Client.Watch by the compiled scope, with the user's pipeline, the
// fullDocument modes, the comment "watchtree:<stream>", MaxAwaitTime and the start position.
// It implements the stream actor's driverWatcher and the checkpointer's PositionSource; its calls run
// on the stream actor's reader goroutine and the checkpointer's I/O goroutine (blocking I/O),
// never on an actor goroutine. The stream actor gets it through bounded (every wait for the
// server bounded by Config.ConnectTimeout); the checkpointer bounds each Current call itself
// (checkpointer.Config.IOTimeout, set to Config.ConnectTimeout).
type driverWatcher struct {
	spec *Spec
	// Client is Stream.Client, else Config.Client; Database the resolved watched database
	// (empty for a cluster stream); MaxAwait the getMores' server-side wait.
	Client   *mongo.Client
	Database string
	MaxAwait time.Duration
	pipeline []bson.Raw // the stages after $changeStream: see excludeStores
	// splits caches whether the server has $changeStreamSplitLargeEvent (SplitAuto): 0 not
	// asked yet, 1 yes, 2 no. Written by whichever open asks first; every answer is the same.
	splits atomic.Int32
}

// newDriverWatcher returns the watcher of spec on database (the resolved watched database), through
// spec.Client or else client.
func newDriverWatcher(spec *Spec, client *mongo.Client, database string) *driverWatcher {
	if spec.Client != nil {
		client = spec.Client
	}
	return &driverWatcher{spec: spec, Client: client, Database: database, MaxAwait: defaultMaxAwaitTime,
		pipeline: spec.WatchPipeline()}
}

// storeCollections are the collections of watchtree's own records.
func storeCollections(deadLetters string) bson.A {
	names := bson.A{mongostore.DefaultCheckpointCollection, mongostore.DefaultGapCollection, mongostore.DefaultLeaseCollection,
		mongostore.DefaultInstanceCollection, mongostore.DefaultSnapshotCollection, mongostore.DefaultDeadLetterCollection, SignalsCollection}
	if deadLetters != mongostore.DefaultDeadLetterCollection {
		names = append(names, deadLetters)
	}
	return names
}

// excludeStores makes a database- or cluster-wide stream whose scope contains the store
// database skip the events of watchtree's own collections there (checkpoint writes, dead
// letters, gaps, leases): otherwise every checkpoint write would be an event of the stream, and
// its handling another checkpoint write. The stage goes first, so the user's stages never see
// those events. A collection stream needs nothing (the store collections are never watched).
func (w *driverWatcher) excludeStores(storeDB, deadLetters string) {
	if w.spec.Scope() == ScopeCollection || (w.spec.Scope() == ScopeDatabase && w.Database != storeDB) {
		return
	}
	stage, err := bson.Marshal(bson.D{{Key: "$match", Value: bson.D{{Key: "$nor", Value: bson.A{
		bson.D{{Key: "ns.db", Value: storeDB}, {Key: "ns.coll", Value: bson.D{{Key: "$in", Value: storeCollections(deadLetters)}}}},
	}}}}})
	if err != nil { // unreachable: a fixed document of strings
		panic(err)
	}
	w.pipeline = append([]bson.Raw{stage}, w.spec.WatchPipeline()...)
}

// watchBatchSize is the change stream's cursor batch size: a quarter of the dispatcher's
// default capacity, so that the reader has credit for the next batches while the lanes work on
// this one, and the getMore that fetches the next runs meanwhile (the server builds batch k+1
// during the handling of batch k). With batches as large as the capacity, the next getMore
// waited for a quarter of the batch to settle. Measured against the reference consumer (median
// of 5 rounds, runs alternating in one session): capacity 1,024 in batches of 1,024, catch-up
// 0.67×; 1,024 in batches of 512, 0.94×; 2,048 in batches of 1,024, 0.76-0.91× and CPU per event
// 1.25-1.39×; 4,096 in batches of 1,024, 0.76-1.18× and 1.09-1.25× (four runs each).
const watchBatchSize = int32(dispatcher.DefaultCapacity / 4)

// Open implements stream.Watcher: it opens the change stream at from (resumeAfter, startAfter,
// startAtOperationTime, or the current position for an unspecified kind), with from's
// MaxAwaitTime and comment. It runs on the stream actor's reader goroutine.
func (w *driverWatcher) Open(ctx context.Context, from stream.Position) (stream.Cursor, error) {
	o := w.spec.ChangeStreamOptions()
	maxAwait := w.MaxAwait
	if from.MaxAwaitTime > 0 {
		maxAwait = from.MaxAwaitTime
	}
	o.SetMaxAwaitTime(maxAwait)
	if from.Comment != "" {
		o.SetComment(from.Comment)
	}
	// Batches of a quarter of the dispatcher's capacity (watchBatchSize) let the getMore for
	// the next batch run while the lanes work on this one. Unbounded, a batch is as large as
	// the server allows (16 MiB, tens of thousands of events), the next getMore starts only
	// when the lanes have nearly caught up, and server and handler time add up instead of
	// overlapping (measured: end-to-end ratio against a raw driver loop 0.83 unbounded, 1.11
	// with 1024).
	o.SetBatchSize(watchBatchSize)
	switch from.Kind {
	case messages.StartKind_START_KIND_RESUME_AFTER:
		o.SetResumeAfter(from.Token)
	case messages.StartKind_START_KIND_START_AFTER:
		o.SetStartAfter(from.Token)
	case messages.StartKind_START_KIND_START_AT_OPERATION_TIME:
		ts := from.OperationTime
		o.SetStartAtOperationTime(&ts)
	case messages.StartKind_START_KIND_UNSPECIFIED:
	default:
		return nil, fmt.Errorf("watchtree: stream %q: cannot open a change stream at start kind %v", w.spec.Name, from.Kind)
	}
	cs, splits, err := w.watch(ctx, o)
	if err != nil {
		return nil, err
	}
	return &opCursor{Cursor: stream.ChangeStreamCursor(cs), cs: cs, maxAwait: maxAwait, splits: splits}, nil
}

// boundedWatcher is the stream actor's driverWatcher: w with every wait for the server bounded by
// connect (Config.ConnectTimeout). The driver waits for a selectable server up to its server
// selection timeout (30s by default) when the context has no deadline: opening the change
// stream, and resuming it inside TryNext after a network error. Without a bound a dead server
// keeps the stream "starting" or "running" that long before it fails.
type boundedWatcher struct {
	w       *driverWatcher
	connect time.Duration
}

// bounded returns the driverWatcher of the stream actor: w with every server wait bounded by connect.
func (w *driverWatcher) bounded(connect time.Duration) boundedWatcher {
	return boundedWatcher{w: w, connect: connect}
}

// Open opens the change stream within connect (or ctx's earlier end). Each TryNext of the
// cursor that may run a getMore (the driver's batch is used up) then gets MaxAwaitTime +
// connect: the getMore waits MaxAwaitTime on the server by design. The open and the getMores
// share one cursorBound on ctx, re-armed for each.
func (b boundedWatcher) Open(ctx context.Context, from stream.Position) (stream.Cursor, error) {
	bound := newCursorBound(ctx)
	bound.arm(b.connect)
	cur, err := b.w.Open(bound, from)
	timedOut := err != nil && bound.Err() == context.DeadlineExceeded && ctx.Err() == nil
	bound.disarm()
	if err != nil {
		bound.release()
		if timedOut && !poolWait(err) { // the pool's wait is the client's, not the server's
			return nil, fmt.Errorf("cannot reach MongoDB within %v: %w", b.connect, err)
		}
		return nil, err
	}
	oc := cur.(*opCursor)
	oc.getMore = oc.maxAwait + b.connect
	oc.bound = bound
	return oc, nil
}

// opCursor is the stream actor's cursor: the stream package's adapter of *mongo.ChangeStream,
// with every getMore bounded (see boundedWatcher). It does not look into events: the reader
// walks each envelope once (and names an invalidate's cause from the event before it).
type opCursor struct {
	stream.Cursor
	cs       *mongo.ChangeStream
	maxAwait time.Duration
	getMore  time.Duration // bound of a TryNext that may run a getMore; 0: none (boundedWatcher sets it)
	bound    *cursorBound  // the open's context, re-armed for each getMore (boundedWatcher sets it)
	timedOut bool          // the last TryNext ran out of getMore: Err says so
	splits   bool          // the pipeline ends with $changeStreamSplitLargeEvent
}

// TryNext reads the next event. A call that may run a getMore (the driver's batch is used up)
// is bounded by getMore when set: through the cursor's bound when ctx is the open's context
// (the reader's, every time), else by a context of its own.
func (c *opCursor) TryNext(ctx context.Context) bool {
	if c.getMore <= 0 || c.cs.RemainingBatchLength() > 0 {
		return c.Cursor.TryNext(ctx)
	}
	if c.bound != nil && c.bound.parentDone != nil && ctx.Done() == c.bound.parentDone {
		c.bound.arm(c.getMore)
		ok := c.Cursor.TryNext(c.bound)
		c.timedOut = !ok && c.bound.Err() == context.DeadlineExceeded && ctx.Err() == nil
		c.bound.disarm()
		return ok
	}
	gctx, cancel := context.WithTimeout(ctx, c.getMore)
	ok := c.Cursor.TryNext(gctx)
	c.timedOut = !ok && gctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	return ok
}

// Close closes the change stream and releases the bound.
func (c *opCursor) Close(ctx context.Context) error {
	err := c.Cursor.Close(ctx)
	if c.bound != nil {
		c.bound.release()
	}
	return err
}

// ID returns the server cursor id (0 once the server closed the cursor).
func (c *opCursor) ID() int64 { return c.cs.ID() }

// CurrentIsStable is true: Current is a sub-slice of a driver reply, which is never reused.
func (c *opCursor) CurrentIsStable() bool { return true }

// SplitsEvents reports whether the server may split events of this cursor (its pipeline ends
// with $changeStreamSplitLargeEvent); without it the reader does not look for splitEvent.
func (c *opCursor) SplitsEvents() bool { return c.splits }

// Err returns the cursor's error, naming the bound when a getMore ran out of it.
func (c *opCursor) Err() error {
	err := c.Cursor.Err()
	if err != nil && c.timedOut && !poolWait(err) { // the pool's wait is the client's, not the server's
		return fmt.Errorf("cannot reach MongoDB within %v (MaxAwaitTime %v + ConnectTimeout %v): %w",
			c.getMore, c.maxAwait, c.getMore-c.maxAwait, err)
	}
	return err
}

// splitMinWireVersion is the wire version of MongoDB 7.0, the first major release with
// $changeStreamSplitLargeEvent.
const splitMinWireVersion = 21

// captureCloseTimeout bounds the close (killCursors) of the capture's change stream, as the
// stream actor bounds its own cursor's close by default.
const captureCloseTimeout = 5 * time.Second

// splitStageRaw is {$changeStreamSplitLargeEvent: {}}.
var splitStageRaw = func() bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: splitStage, Value: bson.D{}}})
	if err != nil { // unreachable: a fixed document
		panic(err)
	}
	return b
}()

// serverSplits reports whether the server supports $changeStreamSplitLargeEvent, asking it
// (hello's maxWireVersion) once per stream, and only for a stream that would use it.
func (w *driverWatcher) serverSplits(ctx context.Context) (bool, error) {
	if w.spec.Split != SplitAuto || w.spec.UserSplits() || !w.spec.WantsSplit(true) {
		return false, nil
	}
	switch w.splits.Load() {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	var hello struct {
		MaxWireVersion int32 `bson:"maxWireVersion"`
	}
	if err := w.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return false, fmt.Errorf("hello (does the server split large events?): %w", err)
	}
	ok := hello.MaxWireVersion >= splitMinWireVersion
	if ok {
		w.splits.Store(1)
	} else {
		w.splits.Store(2)
	}
	return ok, nil
}

// watch calls the Watch method of the stream's scope. splits reports whether the pipeline
// ends with $changeStreamSplitLargeEvent (the stream's or the user's own).
func (w *driverWatcher) watch(ctx context.Context, o *options.ChangeStreamOptionsBuilder) (cs *mongo.ChangeStream, splits bool, err error) {
	pipeline := w.pipeline
	serverSplits, err := w.serverSplits(ctx)
	if err != nil {
		return nil, false, err
	}
	if w.spec.WantsSplit(serverSplits) {
		pipeline = append(append(make([]bson.Raw, 0, len(pipeline)+1), pipeline...), splitStageRaw)
		splits = true
	}
	splits = splits || w.spec.UserSplits()
	switch w.spec.Scope() {
	case ScopeCollection:
		cs, err = w.Client.Database(w.Database).Collection(w.spec.Collection).Watch(ctx, pipeline, o)
	case ScopeDatabase:
		cs, err = w.Client.Database(w.Database).Watch(ctx, pipeline, o)
	default:
		cs, err = w.Client.Watch(ctx, pipeline, o)
	}
	return cs, splits, err
}

// Current implements the checkpointer's PositionSource: it opens a change stream on the
// stream's scope (with its pipeline and comment), reads the initial post-batch resume token of
// the aggregate reply and the reply's operation time (through an explicit session), and closes
// the stream. The token resumes right after everything committed before the call.
func (w *driverWatcher) Current(ctx context.Context) (bson.Raw, bson.Timestamp, error) {
	// Errors are returned as the driver reported them: the checkpointer names the step and the
	// stream actor the stream, and the classifier reads the server's code.
	sess, err := w.Client.StartSession()
	if err != nil {
		return nil, bson.Timestamp{}, fmt.Errorf("start a session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	sctx := mongo.NewSessionContext(ctx, sess)
	// batchSize 0: the first batch is empty, so its post-batch resume token is the position. A
	// first batch with events (written between the server's start point and its reply) has no
	// token the driver hands out before they are read, and the capture would fail.
	cs, _, err := w.watch(sctx, w.spec.ChangeStreamOptions().SetMaxAwaitTime(w.MaxAwait).SetBatchSize(0))
	if err != nil {
		return nil, bson.Timestamp{}, err
	}
	token := append(bson.Raw(nil), cs.ResumeToken()...)
	// The close (killCursors) must not outlive the capture by much either: the server may have
	// gone away right after the reply.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), captureCloseTimeout)
	closeErr := cs.Close(cctx)
	cancel()
	if len(token) == 0 {
		return nil, bson.Timestamp{}, errors.New("the server sent no post-batch resume token")
	}
	var opTime bson.Timestamp
	if t := sess.OperationTime(); t != nil {
		opTime = *t
	}
	// A failed close (killCursors) does not lose the captured position; the server cursor
	// times out by itself.
	_ = closeErr
	return token, opTime, nil
}
