package snapshot

import (
	"context"
	"errors"
	"fmt"
	"github.com/watchtree/watchtree/internal/policyx"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/clock"
	"github.com/watchtree/watchtree/internal/treekit"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
	"github.com/watchtree/watchtree/observe"
	"github.com/watchtree/watchtree/policy"
)

// Phases of an on-demand snapshot's status.
const (
	phaseRunning   = "running"
	phaseDone      = "done"
	phaseFailed    = "failed"
	phaseAbandoned = "abandoned"
)

// OnDemandSource reads the collection and writes the watermarks of an on-demand snapshot. Its
// methods run on the actor's chunk goroutine, with a context cancelled when the run ends.
type OnDemandSource interface {
	// ReadMatching returns up to limit documents matching filter (nil: every document) with
	// _id > after (after is {_id: value}; nil: from the first), in _id order.
	ReadMatching(ctx context.Context, filter, after bson.Raw, limit int) ([]bson.Raw, error)
	// Mark writes the watermark document doc and returns the write's operation time (the
	// cluster time the change stream reaches once it read past the write).
	Mark(ctx context.Context, doc bson.D) (bson.Timestamp, error)
}

// OnDemandConfig configures the on-demand snapshot actor of one stream.
type OnDemandConfig struct {
	// Stream and Instance scope the watermarks (Instance is empty for a SingleLeader stream).
	Stream, Instance string
	// Database and Collection are the watched namespace. Required.
	Database, Collection string
	// Source reads the collection and writes the watermarks. Required.
	Source OnDemandSource
	// BatchSize is the number of documents of a chunk. Default 1000.
	BatchSize int
	// Dispatcher is the dispatcher sibling's name (default "dispatcher"); DispatcherPID, when
	// set, is used instead.
	Dispatcher    string
	DispatcherPID *actor.PID
	// IOTimeout bounds each Source call. Default 10s.
	IOTimeout time.Duration
	// Clock stamps the status. Default clock.Real().
	Clock clock.Clock
	// Logger receives the log lines. Default zap.NewNop().
	Logger *zap.Logger
	// Observer receives the milestones (observe.SnapshotStarted, SnapshotProgress per chunk,
	// SnapshotDone when the snapshot ends), built here with Meta{Stream, Clock.Now()}, on the
	// actor goroutine. It must not block; a panic in it is recovered and logged. Default
	// observe.Nop.
	Observer observe.Observer
}

// DefaultOnDemandConfig returns the defaults of every OnDemandConfig field that has a value
// default: the one source of them (BatchSize is the snapshot policy's). NewOnDemand fills each
// zero field from it, and the runtime builds its on-demand actors from it. The dependencies
// (Clock, Logger, Observer) are not values: nil means the real clock, no log and no events.
func DefaultOnDemandConfig() OnDemandConfig {
	return OnDemandConfig{
		BatchSize:  policyx.WithDefaults(policy.Snapshot{}).BatchSize,
		Dispatcher: treekit.DispatcherName,
		IOTimeout:  treekit.DefaultIOTimeout,
	}
}

// withDefaults returns cfg with every zero field replaced by DefaultOnDemandConfig's value.
func (cfg OnDemandConfig) withDefaults() OnDemandConfig {
	treekit.FillZero(&cfg, DefaultOnDemandConfig())
	treekit.Defaults(cfg.Stream, &cfg.Clock, &cfg.Logger, &cfg.Observer)
	return cfg
}

// NewOnDemand validates cfg and returns the props of the on-demand snapshot actor.
func NewOnDemand(cfg OnDemandConfig) (*actor.Props, error) {
	var errs []error
	if cfg.Stream == "" {
		errs = append(errs, errors.New("snapshot: OnDemandConfig.Stream must not be empty"))
	}
	if cfg.Database == "" || cfg.Collection == "" {
		errs = append(errs, errors.New("snapshot: OnDemandConfig.Collection and Database must not be empty"))
	}
	if cfg.Source == nil {
		errs = append(errs, errors.New("snapshot: OnDemandConfig.Source must not be nil"))
	}
	if cfg.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("snapshot: OnDemandConfig.BatchSize must be >= 0 (0 means %d), got %d", DefaultOnDemandConfig().BatchSize, cfg.BatchSize))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return treekit.Props(func() actor.Actor { return &onDemandActor{cfg: &cfg} }), nil
}

// chunkReady is a chunk read between its watermarks (from the chunk goroutine).
type chunkReady struct {
	run, chunk uint64
	low, high  bson.Timestamp
	keys       []bson.Raw
	events     []wire.Event
	err        error
}

type onDemandActor struct {
	cfg        *OnDemandConfig // shared by every instance (the props keep one copy); never written
	self       *actor.PID
	sys        *actor.ActorSystem
	dispatcher *actor.PID
	run        *odRun
	last       *messages.SnapshotStatus
}

// odRun is one on-demand snapshot: chunks of BatchSize in _id order, one window at a time.
type odRun struct {
	n, chunk   uint64
	id         string
	filter     bson.Raw
	ctx        context.Context
	cancel     context.CancelFunc
	wg         *sync.WaitGroup
	builder    eventBuilder
	after      bson.Raw
	seq        uint64
	firstSeq   uint64 // first seq of the current chunk
	rows       int    // rows of the current chunk
	delivered  int    // rows the dispatcher released (WindowClosed), -1 before
	settled    int
	lastChunk  bool
	st         *messages.SnapshotStatus
	started    time.Time
	chunkCount uint32
}

func (a *onDemandActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.sys, a.dispatcher = ctx.Self(), ctx.ActorSystem(), a.cfg.DispatcherPID
		if p := ctx.Parent(); p != nil && a.dispatcher == nil {
			a.dispatcher = actor.NewPID(p.Address, p.Id+"/"+a.cfg.Dispatcher)
		}
	case *actor.Stopping:
		a.end(ctx, phaseAbandoned, "the stream's tree stopped")
	case *actor.Restarting:
		a.end(ctx, phaseAbandoned, "the on-demand snapshot actor restarted")
	case *messages.OnDemandSnapshot:
		a.onRequest(ctx, m)
	case *wire.AbandonOnDemand:
		a.end(ctx, phaseAbandoned, m.GetWhy())
	case *chunkReady:
		if r := a.run; r != nil && m.run == r.n && m.chunk == r.chunk {
			a.onChunkReady(ctx, m)
		}
	case *wire.WindowClosed:
		if r := a.run; r != nil && m.GetRun() == r.n && m.GetChunk() == r.chunk {
			r.delivered = int(m.GetDelivered())
			r.st.Dropped += uint64(m.GetDropped())
			a.maybeChunkDone(ctx)
		}
	case *wire.SnapshotSettled:
		if r := a.run; r != nil && m.GetRun() == r.n {
			for _, s := range m.GetSettled() {
				if s.GetSeq() < r.firstSeq || s.GetSeq() >= r.firstSeq+uint64(r.rows) {
					continue
				}
				r.settled++
				r.st.Documents++
				if s.GetOutcome() == messages.Outcome_OUTCOME_DEAD_LETTERED {
					r.st.DeadLettered++
				}
			}
			a.maybeChunkDone(ctx)
		}
	}
}

func (a *onDemandActor) onRequest(ctx actor.Context, m *messages.OnDemandSnapshot) {
	if r := a.run; r != nil {
		ctx.Respond(&messages.OnDemandSnapshotReply{Code: treekit.OnDemandBusy, Running: r.id,
			Error: fmt.Sprintf("on-demand snapshot %s is still running", r.id)})
		return
	}
	var filter bson.Raw
	if len(m.GetFilter()) > 0 {
		filter = bson.Raw(m.GetFilter())
		if err := filter.Validate(); err != nil {
			ctx.Respond(&messages.OnDemandSnapshotReply{Code: treekit.OnDemandFailed, Error: "filter: " + err.Error()})
			return
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	now := a.cfg.Clock.Now()
	r := &odRun{n: runs.Add(1), id: m.GetSnapshotId(), filter: filter, ctx: rctx, cancel: cancel, wg: &sync.WaitGroup{},
		builder: newEventBuilder(m.GetSnapshotId(), a.cfg.Database, a.cfg.Collection), started: now,
		st: &messages.SnapshotStatus{SnapshotId: m.GetSnapshotId(), Reason: "on-demand", Running: true, OnDemand: true,
			Phase: phaseRunning, StartedAt: timestamppb.New(now)}}
	a.run = r
	ctx.Respond(&messages.OnDemandSnapshotReply{})
	a.cfg.Logger.Info("on-demand snapshot started", zap.String("snapshot", r.id), zap.Bool("filtered", filter != nil))
	a.report(ctx, started, r.st)
	a.nextChunk(ctx)
}

// nextChunk opens the dispatcher's window, then reads the chunk between its watermarks on a
// goroutine. WindowOpen is queued at the dispatcher before the low watermark is written, so
// every live event after that write reaches the dispatcher after it.
func (a *onDemandActor) nextChunk(ctx actor.Context) {
	r := a.run
	r.chunk++
	r.delivered, r.settled, r.rows = -1, 0, 0
	ctx.Request(a.dispatcher, &wire.WindowOpen{Run: r.n, Chunk: r.chunk})
	n, chunk, after := r.n, r.chunk, r.after
	mark := func(kind string) bson.D {
		return bson.D{{Key: "stream", Value: a.cfg.Stream}, {Key: "instance", Value: a.cfg.Instance},
			{Key: "snapshot", Value: r.id}, {Key: "chunk", Value: int64(chunk)}, {Key: "kind", Value: kind},
			{Key: "at", Value: a.cfg.Clock.Now()}}
	}
	spawn(r.wg, func() {
		out := &chunkReady{run: n, chunk: chunk}
		defer func() {
			if r.ctx.Err() == nil {
				a.sys.Root.Send(a.self, out)
			}
		}()
		io := func(f func(context.Context) error) error { return treekit.Bounded(r.ctx, a.cfg.IOTimeout, f) }
		var docs []bson.Raw
		if out.err = io(func(c context.Context) (err error) { out.low, err = a.cfg.Source.Mark(c, mark("low")); return }); out.err != nil {
			out.err = fmt.Errorf("write the low watermark of chunk %d: %w", chunk, out.err)
			return
		}
		if out.err = io(func(c context.Context) (err error) {
			docs, err = a.cfg.Source.ReadMatching(c, r.filter, after, a.cfg.BatchSize)
			return
		}); out.err != nil {
			out.err = fmt.Errorf("read chunk %d: %w", chunk, out.err)
			return
		}
		if out.err = io(func(c context.Context) (err error) { out.high, err = a.cfg.Source.Mark(c, mark("high")); return }); out.err != nil {
			out.err = fmt.Errorf("write the high watermark of chunk %d: %w", chunk, out.err)
			return
		}
		out.keys, out.events = make([]bson.Raw, len(docs)), make([]wire.Event, len(docs))
		for j, doc := range docs {
			if out.keys[j], out.err = idOf(doc); out.err != nil {
				return
			}
			out.events[j].Raw, _ = r.builder.build(doc, out.keys[j])
		}
	})
}

func (a *onDemandActor) onChunkReady(ctx actor.Context, m *chunkReady) {
	r := a.run
	if m.err != nil {
		a.end(ctx, phaseFailed, m.err.Error())
		return
	}
	r.firstSeq, r.rows = r.seq+1, len(m.events)
	r.lastChunk = len(m.events) < a.cfg.BatchSize
	evs := make([]*wire.Event, len(m.events))
	for i := range m.events {
		r.seq++
		m.events[i].Seq = r.seq
		evs[i] = &m.events[i]
	}
	if len(m.keys) > 0 {
		r.after = m.keys[len(m.keys)-1]
	}
	ctx.Request(a.dispatcher, &wire.WindowChunk{Run: r.n, Chunk: r.chunk,
		Low: uint64(m.low.T)<<32 | uint64(m.low.I), High: uint64(m.high.T)<<32 | uint64(m.high.I), Events: evs})
}

// maybeChunkDone moves to the next chunk once the current one was released and its delivered
// rows settled.
func (a *onDemandActor) maybeChunkDone(ctx actor.Context) {
	r := a.run
	if r.delivered < 0 || r.settled < r.delivered {
		return
	}
	r.chunkCount++
	r.st.ChunksDone = r.chunkCount
	if r.lastChunk {
		a.end(ctx, phaseDone, "")
		return
	}
	a.report(ctx, progress, r.st)
	a.nextChunk(ctx)
}

// end finishes the run in phase (done, failed or abandoned), closing any open window.
func (a *onDemandActor) end(ctx actor.Context, phase, why string) {
	r := a.run
	if r == nil {
		return
	}
	a.run = nil
	r.cancel()
	if phase != phaseDone && a.dispatcher != nil {
		// An empty chunk with high 0 closes the dispatcher's window at once.
		ctx.Send(a.dispatcher, &wire.WindowChunk{Run: r.n, Chunk: r.chunk})
	}
	now := a.cfg.Clock.Now()
	r.st.Running, r.st.Phase = false, phase
	r.st.Done = phase == phaseDone
	r.st.DoneAt = timestamppb.New(now)
	if el := now.Sub(r.started).Seconds(); el > 0 {
		r.st.Rate = float64(r.st.Documents) / el
	}
	if phase != phaseDone {
		r.st.Error = why
		a.cfg.Logger.Warn("on-demand snapshot ended early", zap.String("snapshot", r.id), zap.String("phase", phase),
			zap.String("why", why), zap.Uint32("chunks_done", r.chunkCount))
	} else {
		a.cfg.Logger.Info("on-demand snapshot done", zap.String("snapshot", r.id), zap.Uint64("documents", r.st.Documents),
			zap.Uint64("dropped", r.st.Dropped), zap.Uint64("dead_lettered", r.st.DeadLettered))
	}
	a.last = r.st
	a.report(ctx, done, r.st)
}

// report sends a copy of st to the supervisor (StatusReply.on_demand) and the milestone's
// event to the Observer.
func (a *onDemandActor) report(ctx actor.Context, m milestone, st *messages.SnapshotStatus) {
	st = proto.Clone(st).(*messages.SnapshotStatus)
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, st)
	}
	announce(a.cfg.Observer, a.cfg.Logger, m, observe.Meta{Stream: a.cfg.Stream, Time: a.cfg.Clock.Now()}, st)
}
