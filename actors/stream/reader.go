package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/errdetail"
	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/internal/wire"
	"github.com/watchtree/watchtree/messages"
)

// errCursorClosed is the cause of a READER_END_CURSOR_CLOSED failure: the server closed the
// change stream's cursor (id 0) without an error and without an invalidate event.
var errCursorClosed = errors.New("stream: the server closed the change stream cursor")

// counters are the statistics of one actor instance, written by its reader goroutines and read
// by the actor (StreamStats).
type counters struct {
	events, batches, pbrtBatches atomic.Uint64
	next                         atomic.Uint64 // the seq of the next event to send
	mu                           sync.Mutex
	lastPBRT                     []byte
}

func (c *counters) setPBRT(p []byte) {
	c.mu.Lock()
	c.lastPBRT = p
	c.mu.Unlock()
}

func (c *counters) pbrt() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastPBRT
}

// reader is one generation of the cursor goroutine: it opens the change stream, reads it with
// TryNext and sends EventBatch messages straight to the dispatcher, within the credit. It is
// owned by one actor instance, which cancels it on Restarting and Stopping; it then closes its
// cursor and ends without reporting anything. When it ends by itself it posts ReaderEnded to the
// actor (after closing the cursor), with the error that ended it as the message's cause.
type reader struct {
	cfg        *Config
	log        *zap.Logger
	root       *actor.RootContext
	self       *actor.PID
	dispatcher *actor.PID
	inc, gen   uint64
	pos        Position
	seq        uint64 // the seq of the next event; owned by the goroutine until it ends
	credit     *credit
	stats      *counters
	cancel     context.CancelFunc

	mu   sync.Mutex
	kind messages.StartKind // how the cursor was opened; read by the actor after ReaderOpened
}

func (r *reader) openedKind() messages.StartKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kind
}

// start launches the goroutine.
func (r *reader) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	liveReaders.Add(1)
	go r.run(ctx)
}

// stop cancels the goroutine; it closes its cursor and ends by itself (never waited for on the
// actor goroutine: Close is I/O).
func (r *reader) stop() {
	if r.cancel != nil {
		r.cancel()
	}
}

// liveReaders counts the reader goroutines running in the process (tests assert it drops back).
var liveReaders atomic.Int64

func (r *reader) run(ctx context.Context) {
	defer liveReaders.Add(-1)
	end := r.read(ctx)
	if ctx.Err() != nil {
		return // cancelled by the actor: nothing to report
	}
	end.Incarnation, end.Generation, end.NextSeq = r.inc, r.gen, r.seq
	r.root.Send(r.self, end)
}

// read opens the cursor and reads it until it ends or ctx is cancelled.
func (r *reader) read(ctx context.Context) *wire.ReaderEnded {
	pos := r.pos
	if why := unusableToken(pos); why != "" {
		// Asking the server would only fail the same way, under a code that also means a
		// configuration error: the position is lost, and OnHistoryLost decides what follows.
		return &wire.ReaderEnded{End: wire.ReaderEnd_READER_END_HISTORY_LOST, Error: why}
	}
	cur, err := r.cfg.Watcher.Open(ctx, pos)
	if err != nil && pos.Kind == messages.StartKind_START_KIND_RESUME_AFTER && hasCode(err, codeInvalidResumeToken) {
		// The position is an invalidate's token, which the server accepts only with startAfter
		// (a checkpointer that cannot tell invalidate settlements apart saved it for resumeAfter).
		// Both continue after the token; reopen with startAfter.
		r.log.Warn("resumeAfter refused for an invalidate token; reopening with startAfter", zap.Error(err))
		pos.Kind = messages.StartKind_START_KIND_START_AFTER
		cur, err = r.cfg.Watcher.Open(ctx, pos)
	}
	if err != nil {
		if tokenRefused(pos, err) {
			// The server cannot read the saved token (another deployment's, or damaged in a way
			// the shape check above cannot see): the position is lost as well.
			code, _ := r.serverCode(err)
			return &wire.ReaderEnded{End: wire.ReaderEnd_READER_END_HISTORY_LOST, Error: err.Error(), Code: code,
				Cause: errdetail.Of(err)}
		}
		return r.failed(err, true, false)
	}
	if cur == nil {
		return r.failed(errors.New("Watcher.Open returned no cursor and no error"), true, false)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), r.cfg.CloseTimeout)
		defer cancel()
		if err := cur.Close(cctx); err != nil {
			r.log.Debug("closing the change stream failed", zap.Error(err))
		}
	}()
	r.mu.Lock()
	r.kind = pos.Kind
	r.mu.Unlock()
	r.root.Send(r.self, &wire.ReaderOpened{Incarnation: r.inc, Generation: r.gen})

	last := []byte(r.pos.Token) // the position the actor last reported; PBRT batches only when it moves
	rtc, _ := cur.(readThroughCursor)
	var lastRead string // tokenData of the read-through point last reported (readThroughCursor)
	// readThrough is the cursor's read-through point when later than pbrt and than the one last
	// reported, else nil.
	readThrough := func(pbrt []byte) []byte {
		if rtc == nil {
			return nil
		}
		rt := rtc.ReadThroughToken()
		d := tokentime.Data(rt)
		if d == "" || d <= tokentime.Data(pbrt) || d <= lastRead {
			return nil
		}
		lastRead = d
		return bytes.Clone(rt)
	}
	gotEvent := false
	var lastOp []byte  // the latest drop, rename or dropDatabase (a sub-slice of its event): an invalidate's cause
	var asm reassembly // the fragments of a split event read so far (one per getMore)
	splits := cursorSplits(cur)
	stable := cursorStable(cur)
	for {
		n, ok := r.credit.wait(ctx)
		if !ok {
			return nil
		}
		limit := min(n, uint64(r.cfg.MaxBatch))
		var events [][]byte // the batch's raw events (EventBatch.raw)
		var lastID []byte   // the _id of the batch's last event
		var invalidate []byte
		// A split event started within the credit is read to its end: its fragments are one
		// event, and no position inside it is ever reported.
		for uint64(len(events)) < limit || asm.pending() {
			if !cur.TryNext(ctx) {
				break
			}
			// The driver's event as it is (a sub-slice of its reply, which it never reuses),
			// or a copy when the cursor may overwrite it; then one walk of its envelope.
			raw := cur.Current()
			if !stable {
				raw = bytes.Clone(raw)
			}
			env := scanEnvelope(raw, splits)
			if env.hasSplit {
				frag, of, err := splitInfo(env.split)
				var whole bson.Raw
				if err == nil {
					whole, err = asm.add(raw, frag, of)
				}
				if err != nil {
					return r.failed(err, false, gotEvent)
				}
				if whole == nil {
					continue // the next fragment follows at once (the getMore does not wait)
				}
				raw = whole
				env = scanEnvelope(raw, splits)
			}
			if events == nil {
				// At most the rest of the driver's batch is read in this round.
				events = make([][]byte, 0, min(limit, uint64(cur.RemainingBatchLength())+1))
			}
			r.seq++
			events = append(events, raw)
			lastID = env.id
			op := env.op
			if string(op) == "invalidate" { // no allocation
				invalidate = bytes.Clone(env.id) // kept past the batch: no reply pinned
				break
			}
			switch string(op) {
			case "drop", "rename", "dropDatabase":
				lastOp = op
			}
			if cur.RemainingBatchLength() == 0 {
				break // do not start a getMore (it may wait MaxAwaitTime) while holding events
			}
		}
		if ctx.Err() == nil && asm.pending() && len(events) == 0 && cur.Err() == nil && !serverClosed(cur) {
			// A getMore ended between two fragments without the next one; read on (nothing
			// is reported from inside a split event).
			continue
		}
		if ctx.Err() != nil {
			return nil // events read but not sent are re-read by the next cursor
		}
		if len(events) > 0 {
			gotEvent = true
			var pbrt []byte
			switch {
			case invalidate != nil:
				// After an invalidate none is sent: the PBRT would be the invalidate token
				// itself, which is never a resumeAfter position.
			case asm.pending():
				// The cursor is inside a split event read past the credit's end: the last whole
				// event's token (its last fragment's) is the position.
				pbrt = bytes.Clone(lastID)
			default:
				// The last event's _id, or the server's PBRT when the batch is exhausted; either is
				// a valid position once every event up to through_seq settled.
				pbrt = bytes.Clone(cur.ResumeToken())
			}
			r.credit.take(uint64(len(events)))
			r.stats.events.Add(uint64(len(events)))
			r.stats.next.Store(r.seq)
			if pbrt != nil {
				last = pbrt
				r.stats.setPBRT(pbrt)
			}
			var rt []byte
			if invalidate == nil && !asm.pending() {
				rt = readThrough(pbrt)
			}
			r.send(&wire.EventBatch{Incarnation: r.inc, Raw: events, PostBatchResumeToken: pbrt,
				ThroughSeq: r.seq - 1, EndsWithInvalidate: invalidate != nil, ReadThroughToken: rt})
			if invalidate != nil {
				return &wire.ReaderEnded{End: wire.ReaderEnd_READER_END_INVALIDATED,
					InvalidateToken: invalidate, InvalidateCause: string(lastOp)}
			}
		}
		if err := cur.Err(); err != nil {
			return r.failed(err, false, gotEvent)
		}
		if len(events) > 0 {
			continue
		}
		if serverClosed(cur) {
			return &wire.ReaderEnded{End: wire.ReaderEnd_READER_END_CURSOR_CLOSED, Error: errCursorClosed.Error()}
		}
		// An empty round (one getMore that found nothing): report the PBRT when it moved, or
		// the read-through point when it did (a shared member beside a busy collection).
		if pbrt := cur.ResumeToken(); len(pbrt) > 0 && !asm.pending() {
			moved := !bytes.Equal(pbrt, last)
			if moved {
				last = bytes.Clone(pbrt)
				r.stats.setPBRT(last)
			}
			if rt := readThrough(last); moved || rt != nil {
				r.stats.pbrtBatches.Add(1)
				r.send(&wire.EventBatch{Incarnation: r.inc, PostBatchResumeToken: last, ThroughSeq: r.seq - 1,
					ReadThroughToken: rt})
			}
		}
	}
}

// serverClosed reports whether the server closed the cursor (id 0): TryNext would return false
// forever.
func serverClosed(cur Cursor) bool {
	ic, ok := cur.(idCursor)
	return ok && ic.ID() == 0
}

func (r *reader) send(b *wire.EventBatch) {
	r.stats.batches.Add(1)
	r.root.Send(r.dispatcher, b)
}

// failed classifies an error that ended the reader: a history-lost code while opening, or before
// the first event of this cursor, asks the checkpointer for another position; anything else fails.
func (r *reader) failed(err error, open, gotEvent bool) *wire.ReaderEnded {
	code, lost := r.serverCode(err)
	end := &wire.ReaderEnded{Error: err.Error(), Code: code, Cause: errdetail.Of(err)}
	switch {
	case lost && !gotEvent:
		end.End = wire.ReaderEnd_READER_END_HISTORY_LOST
	case open:
		end.End = wire.ReaderEnd_READER_END_OPEN_FAILED
	default:
		end.End = wire.ReaderEnd_READER_END_CURSOR_FAILED
	}
	return end
}

// codeInvalidResumeToken is the server's InvalidResumeToken (260), the answer to resumeAfter an
// invalidate token.
const codeInvalidResumeToken = 260

// codeChangeStreamFatalError is the server's ChangeStreamFatalError (280).
const codeChangeStreamFatalError = 280

// hasCode reports whether err is a server error with the code.
func hasCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

// serverCode returns the server error code of err (the history-lost one when several) and
// whether it is a history-lost code.
func (r *reader) serverCode(err error) (int32, bool) {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return 0, false
	}
	codes := se.ErrorCodes()
	for _, c := range codes {
		if c == codeChangeStreamFatalError && errdetail.PipelineModifiedID(err) {
			// 280 also reports a user pipeline that removed or changed the event's _id: a
			// configuration error, not lost history, so OnHistoryLost must not skip anything.
			return int32(c), false
		}
		if slices.Contains(r.cfg.HistoryLostCodes, int32(c)) {
			return int32(c), true
		}
	}
	if len(codes) > 0 {
		return int32(codes[0]), false
	}
	return 0, false
}

func (r *reader) String() string { return fmt.Sprintf("reader(inc %d, gen %d)", r.inc, r.gen) }
