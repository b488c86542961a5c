package checkpointer

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/internal/wire"
)

// settledReportEvery is the shortest time between two SettledThrough reports to the supervisor:
// a catch-up moves the position once per settled batch, and a report each would wake the
// supervisor as often. A move within it of the last report is reported when it has passed, so
// Handle.AwaitCaughtUp returns at most this much after the position passed its target.
const settledReportEvery = 50 * time.Millisecond

// clusterTime is the cluster time every event before p has settled up to: the one a resume token
// starts with (an event's own, or a post-batch resume token's; the tracker never moves the
// position past an unsettled event), else the operation time of an At or Rebuild start (the
// stream opens at it, so nothing before it is pending). ok is false for a position without one.
func (p position) clusterTime() (bson.Timestamp, bool) {
	if p.token != nil {
		if _, ts, ok := tokentime.Of(p.token); ok {
			return ts, true
		}
	}
	return p.opTime, !p.opTime.IsZero()
}

// pack orders BSON timestamps as one number.
func pack(ts bson.Timestamp) uint64 { return uint64(ts.T)<<32 | uint64(ts.I) }

// reportSettled tells the parent supervisor the cluster time of the resume position when it moved
// forward since the last report: at once when now (a held-back report is due, the actor stops)
// or settledReportEvery has passed since the last one, else when it has.
func (c *checkpointer) reportSettled(ctx actor.Context, now bool) {
	c.settledVersion = c.t.version
	ts, ok := c.t.pos.clusterTime()
	p := ctx.Parent()
	if !ok || p == nil || c.fenced || pack(ts) <= c.settledSent {
		return
	}
	if !now && !c.settledGate.Pass(c.cfg.Clock.Now(), settledReportEvery) {
		if c.settledTimer == nil {
			c.settledTimer = c.after(tickSettled)
		}
		return
	}
	c.settledSent = pack(ts)
	c.settledGate.Mark(c.cfg.Clock.Now())
	ctx.Send(p, &wire.SettledThrough{ClusterTime: &wire.OperationTime{Seconds: ts.T, Increment: ts.I}})
}
