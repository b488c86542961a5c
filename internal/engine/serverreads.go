package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/internal/readings"
)

// The figures only MongoDB can give (each stream's dead-letter count, the oplog window) are
// read by one goroutine of the runtime's, never on a request's path: the console and the
// metrics ask for them from memory, which starts a refresh when they are older than
// readingsTTL and waits for it at most readings.Wait. So a frozen or stopped server costs a
// request readings.Wait, not a driver timeout: the figures come back marked unknown, with the
// reason and the age of the last known values.

const (
	// readingsTTL is how long a reading counts as current.
	readingsTTL = 2 * time.Second
	// unreachableAfter is how long a refresh may go unanswered before MongoDB counts as
	// unreachable (a refresh that fails as unreachable says so at once).
	unreachableAfter = time.Second
)

type (
	// Readings are readings.Readings (the root converts them to watchtree.ServerReadings).
	Readings     = readings.Readings
	CountReading = readings.Count
	OplogReading = readings.Oplog
	Reading      = readings.Reading
)

// serverReads is the runtime's cache of Readings and the goroutine that refreshes it.
type serverReads struct {
	rt    *Runtime
	bound time.Duration // one refresh's bound (ConnectTimeout)

	mu       sync.Mutex
	counts   map[string]countState
	oplog    OplogReading
	oplogErr error
	// failedSince is when reads started failing as unreachable (zero while they answer),
	// failure the latest such error.
	failedSince time.Time
	failure     error
	// pending is when the running refresh began (zero when none runs), round is closed when
	// it ends.
	pending time.Time
	round   chan struct{}
	// lastRound is when the latest refresh ended: the readings are stale readingsTTL after it.
	lastRound time.Time

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

type countState struct {
	n   int
	at  time.Time
	err error
}

// startServerReads starts the refresh goroutine; stop ends it.
func startServerReads(rt *Runtime) *serverReads {
	ctx, cancel := context.WithCancel(context.Background())
	s := &serverReads{rt: rt, bound: rt.cfg.ConnectTimeout, counts: map[string]countState{}, kick: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// stop ends the goroutine (a refresh under way is cancelled) and waits for it.
func (s *serverReads) stop() {
	s.cancel()
	<-s.done
}

func (s *serverReads) run(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.refresh(ctx)
	}
}

// refresh reads every figure once, each bounded by s.bound, and records the results.
func (s *serverReads) refresh(ctx context.Context) {
	entries := s.rt.registered()
	type result struct {
		name string
		n    int
		err  error
	}
	results := make([]result, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, s.bound)
			defer cancel()
			n, err := s.rt.CountDeadLetters(c, e.name)
			results[i] = result{e.name, n, err}
		})
	}
	c, cancel := context.WithTimeout(ctx, s.bound)
	oldest, newest, oerr := oplogWindow(c, s.rt.cfg.Client, s.bound)
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		oerr = nil // the runtime stops: nothing to record
	}
	now := s.rt.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var unreachable error
	keep := make(map[string]bool, len(results))
	for _, r := range results {
		keep[r.name] = true
		cs := s.counts[r.name]
		switch {
		case r.err == nil:
			cs = countState{n: r.n, at: now}
		default:
			cs.err = r.err
			if isUnreachable(r.err) {
				unreachable = r.err
			}
		}
		s.counts[r.name] = cs
	}
	for name := range s.counts {
		if !keep[name] {
			delete(s.counts, name)
		}
	}
	switch {
	case ctx.Err() != nil:
	case oerr == nil:
		s.oplog, s.oplogErr = OplogReading{Oldest: oldest, Newest: newest, Reading: Reading{At: now}}, nil
	default:
		s.oplogErr = oerr
		if isUnreachable(oerr) {
			unreachable = oerr
		}
	}
	if ctx.Err() == nil {
		if unreachable != nil {
			if s.failedSince.IsZero() {
				s.failedSince = s.pending
			}
			s.failure = unreachable
		} else {
			s.failedSince, s.failure = time.Time{}, nil
		}
	}
	s.pending, s.lastRound = time.Time{}, now
	close(s.round)
	s.round = nil
}

// isUnreachable reports whether err says the server did not answer: the read's bound passed, a
// network error, or no server could be selected.
func isUnreachable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || mongo.IsTimeout(err) || mongo.IsNetworkError(err)
}

// causeText is err's text without the driver's topology dump, which can run to kilobytes.
func causeText(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ", current topology:"); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// readings returns the Readings from memory. When they are older than readingsTTL it starts a
// refresh (unless one runs) and waits for it at most wait, or until ctx ends.
func (s *serverReads) readings(ctx context.Context, wait time.Duration) Readings {
	now := s.rt.clk.Now()
	s.mu.Lock()
	stale := now.Sub(s.lastRound) >= readingsTTL
	for _, e := range s.rt.registered() {
		if _, ok := s.counts[e.name]; !ok {
			stale = true // a stream spawned since
		}
	}
	round := s.round
	if stale && round == nil {
		s.round, s.pending = make(chan struct{}), now
		round = s.round
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	// Every request waits for a round at most wait after the round began: during an outage
	// only the first waits, the others answer at once.
	left := s.pending.Add(wait).Sub(now)
	s.mu.Unlock()
	if stale && round != nil && left > 0 {
		t := time.NewTimer(left)
		select {
		case <-round:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return s.snapshot()
}

// snapshot copies the cache, marking what is not current.
func (s *serverReads) snapshot() Readings {
	now := s.rt.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Readings{DeadLetters: make(map[string]CountReading, len(s.counts))}
	switch {
	case !s.failedSince.IsZero():
		out.Unreachable = readings.Unreachable(s.failedSince, now, causeText(s.failure))
	case !s.pending.IsZero() && now.Sub(s.pending) >= unreachableAfter:
		out.Unreachable = readings.Unreachable(s.pending, now, fmt.Sprintf("no answer for %v", now.Sub(s.pending).Round(100*time.Millisecond)))
	}
	slow := ""
	if !s.pending.IsZero() && now.Sub(s.pending) >= readings.Wait {
		slow = fmt.Sprintf("MongoDB has not answered for %v", now.Sub(s.pending).Round(time.Millisecond))
	}
	unknown := func(at time.Time, err error, what string) string {
		switch {
		case err != nil && isUnreachable(err) && out.Unreachable != "":
			return out.Unreachable + lastKnown(at, now)
		case err != nil && what == "":
			return causeText(err) + lastKnown(at, now) // the error names what failed
		case err != nil:
			return what + ": " + causeText(err) + lastKnown(at, now)
		case out.Unreachable != "" && now.Sub(at) >= readingsTTL:
			return out.Unreachable + lastKnown(at, now)
		case slow != "" && now.Sub(at) >= readingsTTL:
			return slow + lastKnown(at, now)
		case at.IsZero():
			return "not read yet"
		}
		return ""
	}
	for _, e := range s.rt.registered() {
		c := s.counts[e.name]
		out.DeadLetters[e.name] = CountReading{N: c.n, Reading: Reading{At: c.at, Unknown: unknown(c.at, c.err, "")}}
	}
	out.Oplog = s.oplog
	out.Oplog.Unknown = unknown(s.oplog.At, s.oplogErr, "oplog not readable")
	return out
}

// lastKnown says how old the last known value is.
func lastKnown(at, now time.Time) string {
	if at.IsZero() {
		return " (never read)"
	}
	return fmt.Sprintf(" (last read %v ago)", now.Sub(at).Round(time.Second))
}

// Readings returns the figures only MongoDB can give (every stream's dead-letter count, the
// oplog window) from memory: when they are older than 2s it starts a refresh off the caller's
// path and waits for it at most wait (readings.Wait when 0), or until ctx ends. Before Start and
// after Stop every figure is unknown.
func (rt *Runtime) Readings(ctx context.Context, wait time.Duration) Readings {
	rt.mu.Lock()
	s := rt.reads
	rt.mu.Unlock()
	if wait <= 0 {
		wait = readings.Wait
	}
	if s == nil {
		return Readings{Unreachable: "the runtime is not running", DeadLetters: map[string]CountReading{},
			Oplog: OplogReading{Reading: Reading{Unknown: "the runtime is not running"}}}
	}
	return s.readings(ctx, wait)
}

// registered returns the registered entries.
func (rt *Runtime) registered() []*Entry {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.entriesLocked()
}
