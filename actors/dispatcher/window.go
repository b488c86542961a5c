package dispatcher

import (
	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/internal/wire"
)

// window is an on-demand snapshot chunk between its watermarks (DBLog style). From WindowOpen
// on, the dispatcher records the _id and cluster time of every live event it accepts; once the
// chunk's rows arrived (WindowChunk) and the stream read past the high watermark, the rows whose
// _id a live event later than the low watermark touched are dropped (the stream carries a newer
// version) and the others are accepted as snapshot events at that point of the stream: before
// any later live event, so a key's lane runs the row ahead of the key's next change. The stream
// may have read past the high watermark before the chunk arrived: the live events it accepted
// meanwhile are recorded too, and their rows dropped, since those events already run ahead.
type window struct {
	run, chunk uint64
	src        *actor.PID
	touched    map[string]uint64 // _id key → newest cluster time (packed t<<32|i)
	rows       *wire.WindowChunk
}

// pack orders BSON timestamps as one number.
func pack(ts bson.Timestamp) uint64 { return uint64(ts.T)<<32 | uint64(ts.I) }

// idKey returns the bytes of documentKey._id of a change or snapshot event (type and value),
// ok false when it has none.
func idKey(raw []byte) (string, bool) {
	dk, ok := laneKey(raw)
	if !ok {
		return "", false
	}
	v, err := bsoncore.Document(dk).LookupErr("_id")
	if err != nil {
		return "", false
	}
	return string(append([]byte{byte(v.Type)}, v.Data...)), true
}

func (d *dispatcher) onWindowOpen(ctx actor.Context, m *wire.WindowOpen) {
	if d.win != nil && d.win.rows != nil {
		d.log.Warn("WindowOpen while a chunk waits for its high watermark; the older chunk is abandoned",
			zap.Uint64("run", d.win.run), zap.Uint64("chunk", d.win.chunk))
	}
	d.win = &window{run: m.GetRun(), chunk: m.GetChunk(), src: ctx.Sender(), touched: map[string]uint64{}}
	d.onDemandRun, d.onDemandSrc = m.GetRun(), ctx.Sender()
}

func (d *dispatcher) onWindowChunk(ctx actor.Context, m *wire.WindowChunk) {
	w := d.win
	if w == nil || w.run != m.GetRun() || w.chunk != m.GetChunk() || d.draining || d.drained {
		d.log.Debug("WindowChunk without its open window dropped", zap.Uint64("run", m.GetRun()), zap.Uint64("chunk", m.GetChunk()))
		return
	}
	w.rows = m
	if d.readThroughTS >= m.GetHigh() {
		d.closeWindow(ctx)
	}
}

// acceptLive accepts a live batch's events, recording them for the open window and releasing
// its chunk right before the first event past the high watermark, or after the batch when its
// post-batch resume token reached it.
func (d *dispatcher) acceptLive(ctx actor.Context, b *wire.EventBatch) {
	first := b.ThroughSeq - uint64(len(b.Raw)) + 1
	last := len(b.Raw) - 1
	for i, raw := range b.Raw {
		ev := event{seq: first + uint64(i), raw: raw, invalidate: i == last && b.EndsWithInvalidate}
		if w := d.win; w != nil {
			ev.token = tokenOf(raw)
			_, ts, ok := tokentime.Of(ev.token)
			at := pack(ts)
			if ok && w.rows != nil && at > w.rows.GetHigh() {
				d.pushStaged() // the events before it go first
				d.closeWindow(ctx)
			} else if k, kok := idKey(raw); kok && ok && at > w.touched[k] {
				w.touched[k] = at
			}
		}
		d.acceptItem(item{ev: ev, incarnation: b.Incarnation})
	}
	d.pushStaged()
	if _, ts, ok := tokentime.Of(b.PostBatchResumeToken); ok && pack(ts) > d.readThroughTS {
		d.readThroughTS = pack(ts)
	}
	if w := d.win; w != nil && w.rows != nil && d.readThroughTS >= w.rows.GetHigh() {
		d.closeWindow(ctx)
	}
}

// closeWindow releases the open window's chunk: rows touched inside the window are dropped, the
// others accepted as snapshot events of the window's run.
func (d *dispatcher) closeWindow(ctx actor.Context) {
	w := d.win
	d.win = nil
	low := w.rows.GetLow()
	keep := make([]*wire.Event, 0, len(w.rows.GetEvents()))
	for _, ev := range w.rows.GetEvents() {
		if k, ok := idKey(ev.Raw); ok {
			// Touched after the low watermark: inside the window, or past it when the stream
			// outran the chunk (its live event, newer than the row, is already in the lanes).
			if w.touched[k] > low {
				continue
			}
		}
		keep = append(keep, ev)
	}
	dropped := len(w.rows.GetEvents()) - len(keep)
	if len(keep) > 0 {
		d.snapInFlight += len(keep)
		d.acceptSnapshot(keep, w.run)
	}
	if w.src != nil {
		ctx.Send(w.src, &wire.WindowClosed{Run: w.run, Chunk: w.chunk, Dropped: uint32(dropped), Delivered: uint32(len(keep))})
	}
}
