// Package prometheus exports a watchtree runtime's metrics to Prometheus
// (github.com/prometheus/client_golang), every series labelled by stream.
//
// A Metrics value is two things at once:
//
//   - an observe.Observer (and observe.HandlerObserver): set it as Config.Observer (or in an
//     observe.Multi) and it counts what the runtime reports: retries, skips, dead letters,
//     restarts, stops, checkpoints, history lost, gaps, and the handler duration histogram
//     (the event kinds no counter follows are listed, with the reason, in notCounted);
//
//   - a prometheus.Collector: registered with a registry, it reads the runtime's state at each
//     scrape (Runtime.Streams, CountDeadLetters, OplogWindow): events by outcome, state, role,
//     lag, in flight, restart attempt, dead-letter backlog, checkpoint age and token headroom.
//
// Wiring it up:
//
//	m := prometheus.New(prometheus.Options{})
//	rt, _ := watchtree.New(watchtree.Config{..., Observer: m})
//	m.Attach(rt)
//	reg := prom.NewRegistry()
//	reg.MustRegister(m)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
package prometheus

import (
	"context"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// Source is what a scrape reads; *watchtree.Runtime is one.
type Source interface {
	// Streams returns the status of every stream (the gauges); an error leaves them out of
	// the scrape.
	Streams(ctx context.Context) ([]watchtree.StreamStatus, error)
	// CountDeadLetters returns the number of dead letters of stream (the backlog gauge).
	CountDeadLetters(ctx context.Context, stream string) (int, error)
	// OplogWindow returns the wall times of the oldest and newest oplog entries (token
	// headroom); an error, e.g. an oplog the client may not read, leaves that gauge out.
	OplogWindow(ctx context.Context) (oldest, newest time.Time, err error)
	// ObserverStats returns the Observer queue's counts (watchtree_observer_dropped_total).
	ObserverStats() watchtree.ObserverStats
}

// Options configure New. The zero value means the defaults.
type Options struct {
	// Namespace prefixes every metric name. Default "watchtree".
	Namespace string
	// Buckets are the handler duration histogram's buckets, in seconds. Default from 1ms to
	// 10s (prometheus.ExponentialBuckets(0.001, 2.5, 11)).
	Buckets []float64
	// ScrapeTimeout bounds the reads of one scrape. Default 5s.
	ScrapeTimeout time.Duration
}

// Metrics is the adapter; see the package documentation. It is safe for concurrent use.
type Metrics struct {
	opts Options

	retries, deadLetters, dropped, restarts, checkpoints, checkpointFailures *prom.CounterVec
	historyLost, gaps, deadLetterFailures, skipped                           *prom.CounterVec
	stops                                                                    *prom.CounterVec
	handler                                                                  *prom.HistogramVec

	events, state, role, lag, inFlight, attempt, backlog, cpAge, headroom, observerDropped *prom.Desc

	mu  sync.Mutex
	src Source
}

var (
	_ observe.Observer        = (*Metrics)(nil)
	_ observe.HandlerObserver = (*Metrics)(nil)
	_ prom.Collector          = (*Metrics)(nil)
)

// notCounted are the event kinds OnEvent counts nothing for, each with the reason: every other
// kind changes a counter. A new kind must go to one or the other (the package's test checks
// that every kind of observe.Kinds is in exactly one).
var notCounted = map[observe.Kind]string{
	observe.KindStarted:           "a start is the stream_state gauge (running) and restarts_total counts the restarts",
	observe.KindInvalidated:       "an invalidate that stops the stream is counted in stops_total (crashed, terminal); one that reopens is not a failure",
	observe.KindLeadershipChanged: "leadership is the stream_role gauge (leader, standby), read at each scrape",
	observe.KindSnapshotStarted:   "a snapshot is the stream_state gauge (snapshotting); its documents are handler calls (handler_duration_seconds)",
	observe.KindSnapshotResumed:   "as SnapshotStarted",
	observe.KindSnapshotProgress:  "progress is a status, not a count: Runtime.Streams reports it",
	observe.KindSnapshotDone:      "as SnapshotStarted",
	observe.KindNamespaceMissing:  "a warning with a state, repeated every minute while it holds: StreamStatus.Warnings and the console's note carry it",
}

// New returns the adapter. Attach the runtime before the first scrape for the state gauges; the
// Observer counters work without it.
func New(o Options) *Metrics {
	if o.Namespace == "" {
		o.Namespace = "watchtree"
	}
	if len(o.Buckets) == 0 {
		o.Buckets = prom.ExponentialBuckets(0.001, 2.5, 11)
	}
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 5 * time.Second
	}
	ns := o.Namespace
	counter := func(name, help string, labels ...string) *prom.CounterVec {
		return prom.NewCounterVec(prom.CounterOpts{Namespace: ns, Name: name, Help: help}, append([]string{"stream"}, labels...))
	}
	desc := func(name, help string, labels ...string) *prom.Desc {
		return prom.NewDesc(prom.BuildFQName(ns, "", name), help, append([]string{"stream"}, labels...), nil)
	}
	return &Metrics{
		opts:               o,
		retries:            counter("retries_total", "Handler attempts that failed and were scheduled for a retry."),
		deadLetters:        counter("dead_letters_total", "Events dead-lettered (record durably written)."),
		dropped:            counter("events_dropped_total", "Events whose attempts ran out with dead letters disabled (lost)."),
		deadLetterFailures: counter("dead_letter_failures_total", "Failed dead-letter writes (retried; the event stays unsettled)."),
		skipped:            counter("skipped_total", "Events settled on purpose by a Skip error."),
		restarts:           counter("restarts_total", "Successful restarts of the stream after a crash."),
		stops:              counter("stops_total", "Stops of the stream, by reason (graceful, crashed) and whether terminal.", "reason", "terminal"),
		checkpoints:        counter("checkpoints_total", "Checkpoints written."),
		checkpointFailures: counter("checkpoint_failures_total", "Failed checkpoint writes (retried)."),
		historyLost:        counter("history_lost_total", "Saved positions no longer in the oplog."),
		gaps:               counter("gaps_total", "Gap records written (history skipped on purpose)."),
		handler: prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: "handler_duration_seconds",
			Help: "Duration of each handler call (every attempt), by result (ok, error).", Buckets: o.Buckets}, []string{"stream", "result"}),
		events:          desc("events_total", "Events settled since the stream's tree spawned, by outcome (handled, filtered, unhandled, skipped, dead_lettered).", "outcome"),
		state:           desc("stream_state", "1 for the stream's current state, 0 for the others.", "state"),
		role:            desc("stream_role", "1 for the stream's role: leader, standby, or all-instances.", "role"),
		lag:             desc("stream_lag_seconds", "Now minus the cluster time of the newest position the stream has read."),
		inFlight:        desc("stream_in_flight", "Events accepted by the dispatcher and not settled."),
		attempt:         desc("stream_restart_attempt", "Deaths since the last successful resubscription (0 when healthy)."),
		backlog:         desc("dead_letter_backlog", "Unexpired dead letters in the stream's store."),
		cpAge:           desc("checkpoint_age_seconds", "Time since the latest checkpoint write."),
		headroom:        desc("token_headroom_seconds", "The saved token's cluster time minus the oldest oplog entry's (when the oplog is readable); near 0 means history is about to be lost."),
		observerDropped: prom.NewDesc(prom.BuildFQName(ns, "", "observer_dropped_total"), "Observer events dropped because the Observer fell behind.", nil, nil),
	}
}

// Attach sets the runtime the scrapes read.
func (m *Metrics) Attach(src Source) {
	m.mu.Lock()
	m.src = src
	m.mu.Unlock()
}

// OnEvent implements observe.Observer: it counts the event, unless its kind is in notCounted.
func (m *Metrics) OnEvent(ev observe.Event) {
	s := ev.EventMeta().Stream
	switch e := ev.(type) {
	case observe.RetryScheduled:
		m.retries.WithLabelValues(s).Inc()
	case observe.DeadLettered:
		if e.Dropped {
			m.dropped.WithLabelValues(s).Inc()
		} else {
			m.deadLetters.WithLabelValues(s).Inc()
		}
	case observe.DeadLetterFailed:
		m.deadLetterFailures.WithLabelValues(s).Inc()
	case observe.Skipped:
		m.skipped.WithLabelValues(s).Inc()
	case observe.Restarted:
		m.restarts.WithLabelValues(s).Inc()
	case observe.Stopped:
		terminal := "false"
		if e.Terminal {
			terminal = "true"
		}
		m.stops.WithLabelValues(s, e.Reason.String(), terminal).Inc()
	case observe.Checkpointed:
		m.checkpoints.WithLabelValues(s).Inc()
	case observe.CheckpointFailed:
		m.checkpointFailures.WithLabelValues(s).Inc()
	case observe.HistoryLost:
		m.historyLost.WithLabelValues(s).Inc()
	case observe.GapRecorded:
		m.gaps.WithLabelValues(s).Inc()
	}
}

// ObserveHandler implements observe.HandlerObserver.
func (m *Metrics) ObserveHandler(stream string, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.handler.WithLabelValues(stream, result).Observe(took.Seconds())
}

func (m *Metrics) vecs() []prom.Collector {
	return []prom.Collector{m.retries, m.deadLetters, m.dropped, m.deadLetterFailures, m.skipped, m.restarts,
		m.stops, m.checkpoints, m.checkpointFailures, m.historyLost, m.gaps, m.handler}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prom.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	for _, d := range []*prom.Desc{m.events, m.state, m.role, m.lag, m.inFlight, m.attempt, m.backlog, m.cpAge, m.headroom, m.observerDropped} {
		ch <- d
	}
}

// states are every state a stream reports, for the state gauge's zeroes.
var states = []watchtree.StreamState{watchtree.StateStarting, watchtree.StateStandby, watchtree.StateSnapshotting,
	watchtree.StateRunning, watchtree.StateBackoff, watchtree.StateStopping, watchtree.StateStopped, watchtree.StateCrashed}

// Collect implements prometheus.Collector: the Observer counters, then the state read now.
// A runtime that does not answer in ScrapeTimeout gives the streams that did answer.
func (m *Metrics) Collect(ch chan<- prom.Metric) {
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	m.mu.Lock()
	src := m.src
	m.mu.Unlock()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
	defer cancel()
	ch <- prom.MustNewConstMetric(m.observerDropped, prom.CounterValue, float64(src.ObserverStats().Dropped))
	sts, _ := src.Streams(ctx) // the streams that answered
	oldest, _, oerr := src.OplogWindow(ctx)
	now := time.Now()
	for _, st := range sts {
		n := st.Name
		for outcome, v := range map[string]uint64{"handled": st.Handled, "filtered": st.Filtered, "unhandled": st.Unhandled,
			"skipped": st.Skipped, "dead_lettered": st.DeadLettered} {
			ch <- prom.MustNewConstMetric(m.events, prom.CounterValue, float64(v), n, outcome)
		}
		for _, s := range states {
			v := 0.0
			if st.State == s {
				v = 1
			}
			ch <- prom.MustNewConstMetric(m.state, prom.GaugeValue, v, n, string(s))
		}
		ch <- prom.MustNewConstMetric(m.role, prom.GaugeValue, 1, n, roleOf(st))
		if !st.ReadThrough.IsZero() {
			ch <- prom.MustNewConstMetric(m.lag, prom.GaugeValue, max(now.Sub(st.ReadThrough).Seconds(), 0), n)
		}
		ch <- prom.MustNewConstMetric(m.inFlight, prom.GaugeValue, float64(st.InFlight), n)
		ch <- prom.MustNewConstMetric(m.attempt, prom.GaugeValue, float64(st.Attempt), n)
		if c, err := src.CountDeadLetters(ctx, n); err == nil {
			ch <- prom.MustNewConstMetric(m.backlog, prom.GaugeValue, float64(c), n)
		}
		if !st.CheckpointAt.IsZero() {
			ch <- prom.MustNewConstMetric(m.cpAge, prom.GaugeValue, max(now.Sub(st.CheckpointAt).Seconds(), 0), n)
		}
		if at, ok := watchtree.TokenClusterTime(st.Checkpoint); ok && oerr == nil {
			ch <- prom.MustNewConstMetric(m.headroom, prom.GaugeValue, at.Sub(oldest).Seconds(), n)
		}
	}
}

// roleOf is the stream's role: standby while it waits for the lease, else its mode's role.
func roleOf(st watchtree.StreamStatus) string {
	switch {
	case st.State == watchtree.StateStandby:
		return "standby"
	case st.Mode == watchtree.SingleLeader:
		return "leader"
	}
	return "all-instances"
}
