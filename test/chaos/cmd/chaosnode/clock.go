package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/watchtree/watchtree"
)

// skewEvery is how often a skewClock re-reads its file.
const skewEvery = 50 * time.Millisecond

// skewClock is the node's watchtree.Config.Clock under the nemesis's clock-skew fault: the real
// wall time, stepped by an offset and drifting at a rate that the file at path sets ("<offset>
// <rate>", e.g. "-7s 0" or "2s 0.3": the clock then reads the real time + 2s and gains 0.3 s a
// second from there; missing or empty: no skew). Its readings carry no monotonic reading, so
// every difference of two of them sees the steps and the drift, as a wall clock stepped by NTP
// would show them to a runtime that measured time with Now. Timers (AfterFunc) run on real
// durations, and it has no Mono: the runtime measures a lease's term on the process's monotonic
// clock. The file is re-read every skewEvery, so a skew takes effect without a restart.
type skewClock struct {
	path     string
	onChange func(raw string) // called with the file's content when it takes effect; optional

	mu         sync.Mutex
	raw        string    // the file's content in force
	anchorReal time.Time // when it took effect (with the process's monotonic reading)
	anchorWall time.Time // this clock's reading then (wall only)
	rate       float64   // seconds gained a second since anchorReal
}

var _ watchtree.Clock = (*skewClock)(nil)

func newSkewClock(path string, onChange func(raw string)) *skewClock {
	now := time.Now()
	c := &skewClock{path: path, onChange: onChange, anchorReal: now, anchorWall: now.Round(0)}
	c.reload()
	return c
}

// Now is the skewed wall time.
func (c *skewClock) Now() time.Time {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	el := now.Sub(c.anchorReal)
	return c.anchorWall.Add(el + time.Duration(float64(el)*c.rate))
}

// AfterFunc runs f after d of real time.
func (c *skewClock) AfterFunc(d time.Duration, f func()) watchtree.Timer { return time.AfterFunc(d, f) }

// unskew maps a reading t of this clock back to the real time, by the skew in force now (the
// history's time base is the real clock; an event read across a change of skew is off by it).
func (c *skewClock) unskew(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := float64(t.Sub(c.anchorWall)) / (1 + c.rate)
	return c.anchorReal.Add(time.Duration(el)).Round(0)
}

// run re-reads the file every skewEvery until ctx ends.
func (c *skewClock) run(ctx context.Context) {
	t := time.NewTicker(skewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.reload()
		}
	}
}

// reload applies the file's skew when it changed: the clock steps to the real time + offset,
// and drifts at rate from there.
func (c *skewClock) reload() {
	b, err := os.ReadFile(c.path)
	if err != nil && !os.IsNotExist(err) {
		return
	}
	raw := strings.TrimSpace(string(b))
	c.mu.Lock()
	defer c.mu.Unlock()
	if raw == c.raw {
		return
	}
	offset, rate, err := parseSkew(raw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaosnode: -clock-file %s: %v\n", c.path, err)
		return
	}
	now := time.Now()
	c.raw, c.anchorReal, c.anchorWall, c.rate = raw, now, now.Add(offset).Round(0), rate
	if c.onChange != nil {
		c.onChange(raw)
	}
}

// parseSkew reads "<offset> <rate>" ("" is no skew); rate must be > -1 (a clock that runs).
func parseSkew(raw string) (time.Duration, float64, error) {
	f := strings.Fields(raw)
	if len(f) == 0 {
		return 0, 0, nil
	}
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("want \"<offset> <rate>\", got %q", raw)
	}
	offset, err := time.ParseDuration(f[0])
	if err != nil {
		return 0, 0, fmt.Errorf("offset: %w", err)
	}
	rate, err := strconv.ParseFloat(f[1], 64)
	if err != nil || rate <= -1 {
		return 0, 0, fmt.Errorf("rate %q: want a number > -1", f[1])
	}
	return offset, rate, nil
}
