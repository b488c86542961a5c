package stream

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// ChangeStreamCursor adapts a *mongo.ChangeStream to Cursor (Current is a field of
// *mongo.ChangeStream, a method here). It also exposes ID, which the stream actor uses to tell a
// cursor the server closed (id 0, no error) from an idle one.
func ChangeStreamCursor(cs *mongo.ChangeStream) Cursor { return changeStream{cs} }

type changeStream struct{ cs *mongo.ChangeStream }

func (c changeStream) TryNext(ctx context.Context) bool { return c.cs.TryNext(ctx) }
func (c changeStream) Current() bson.Raw                { return c.cs.Current }
func (c changeStream) ResumeToken() bson.Raw            { return c.cs.ResumeToken() }
func (c changeStream) RemainingBatchLength() int        { return c.cs.RemainingBatchLength() }
func (c changeStream) Err() error                       { return c.cs.Err() }
func (c changeStream) Close(ctx context.Context) error  { return c.cs.Close(ctx) }
func (c changeStream) ID() int64                        { return c.cs.ID() }

// CurrentIsStable is true: the driver reads every reply into memory of its own and never
// reuses it, and Current is a sub-slice of that reply.
func (c changeStream) CurrentIsStable() bool { return true }

// idCursor is implemented by cursors that know their server cursor id (ChangeStreamCursor).
// A cursor whose id is 0 is closed on the server: TryNext would return false forever.
type idCursor interface{ ID() int64 }

// readThroughCursor is implemented by cursors that can have read past their resume position
// (a shared stream's member, through its hub's cursor): ReadThroughToken is the newest point
// read through, a token to measure lag by, never to resume from. The reader sends it beside
// the PBRT (EventBatch.ReadThroughToken) when it is later.
type readThroughCursor interface{ ReadThroughToken() bson.Raw }

// stableCursor is implemented by cursors whose Current stays valid and unchanged after later
// calls of TryNext (ChangeStreamCursor). The reader then hands Current on as it is; for any
// other cursor it copies every event.
type stableCursor interface{ CurrentIsStable() bool }

// cursorStable reports whether cur's Current may be kept past the next TryNext.
func cursorStable(cur Cursor) bool {
	sc, ok := cur.(stableCursor)
	return ok && sc.CurrentIsStable()
}

// splitCursor is implemented by cursors that know whether their pipeline ends with
// $changeStreamSplitLargeEvent. A cursor that does not implement it is assumed to split: the
// reader then looks for splitEvent in every event.
type splitCursor interface{ SplitsEvents() bool }

// cursorSplits reports whether cur may return event fragments.
func cursorSplits(cur Cursor) bool {
	sc, ok := cur.(splitCursor)
	return !ok || sc.SplitsEvents()
}
