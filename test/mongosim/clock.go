package mongosim

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// clusterClock hands out strictly increasing cluster times: T is the wall-clock second (from
// Options.Now), I a counter within the second. If the wall clock goes backwards, T holds.
type clusterClock struct {
	mu  sync.Mutex
	now func() time.Time
	cur bson.Timestamp
}

func newClusterClock(now func() time.Time) *clusterClock {
	c := &clusterClock{now: now}
	c.cur = bson.Timestamp{T: uint32(now().Unix()), I: 1}
	return c
}

// tick returns a new cluster time, greater than every one handed out before.
func (c *clusterClock) tick() bson.Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	sec := uint32(c.now().Unix())
	if sec > c.cur.T {
		c.cur = bson.Timestamp{T: sec, I: 1}
	} else {
		c.cur.I++
	}
	return c.cur
}

// last returns the most recent cluster time handed out (the last applied optime).
func (c *clusterClock) last() bson.Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// tsLess orders two timestamps.
func tsLess(a, b bson.Timestamp) bool {
	return a.T < b.T || (a.T == b.T && a.I < b.I)
}

// tsNext returns the timestamp one tick after t.
func tsNext(t bson.Timestamp) bson.Timestamp {
	if t.I == ^uint32(0) {
		return bson.Timestamp{T: t.T + 1, I: 0}
	}
	return bson.Timestamp{T: t.T, I: t.I + 1}
}
