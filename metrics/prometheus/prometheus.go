// Package prometheus exports a watchtree runtime's metrics to Prometheus
// (github.com/prometheus/client_golang), every series labelled by stream.
//
// A Metrics value is two things at once. It is an observe.Observer (and
// observe.HandlerObserver): set it as Config.Observer (or in an observe.Multi) and it counts
// what the runtime reports: retries, dead letters, checkpoints, history lost, gaps, stops, and
// the handler duration histogram. The event kinds no counter follows are listed, with the
// reason, in notCounted.
//
// It is also a prometheus.Collector: registered with a registry, it reads the runtime's state
// at each scrape, from memory (Runtime.Streams, Runtime.Readings): events by outcome, restarts,
// state, role, lag, in flight, restart attempt, lease epoch and counts, dead-letter backlog,
// checkpoint age, token headroom and whether MongoDB answers. A scrape never waits on MongoDB:
// with the server down it answers within about 50ms, the figures that need the server left out.
//
// Every counter has a series per stream from the stream's first scrape (or first event) on,
// at 0, so that rate() sees the stream before its first retry or crash. Attach the runtime
// before the first scrape; a scrape of a Metrics never attached fails (ErrNotAttached), and
// Attach refuses a second runtime (ErrAttached).
//
// Wiring it up:
//
//	m := prometheus.New(prometheus.Options{})
//	rt, _ := watchtree.New(watchtree.Config{..., Observer: m})
//	if err := m.Attach(rt); err != nil { ... }
//	reg := prom.NewRegistry()
//	reg.MustRegister(m)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
package prometheus

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/watchtree/watchtree"

	"github.com/watchtree/watchtree/observe"
)

// Source is what a scrape reads; *watchtree.Runtime is one. Every method answers from memory.
type Source interface {
	// Streams returns the status of every stream (the gauges and the scrape-time counters);
	// an error leaves the streams that did not answer out of the scrape.
	Streams(ctx context.Context) ([]watchtree.StreamStatus, error)
	// Readings returns the figures only MongoDB gives (dead-letter backlog, oplog window), as
	// last read; those not current are left out of the scrape.
	Readings(ctx context.Context) watchtree.ServerReadings
	// ObserverStats returns the Observer queue's counts (watchtree_observer_dropped_total).
	ObserverStats() watchtree.ObserverStats
}

// ErrNotAttached is the error of a scrape of a Metrics that was never attached to a runtime:
// without Attach the state gauges would be missing without a word.
var ErrNotAttached = errors.New("watchtree metrics: scraped before Attach: call Metrics.Attach(rt) before registering it")

// ErrAttached is returned by Attach when the Metrics already reads a runtime (one Metrics per
// runtime: the counters are the runtime's).
var ErrAttached = errors.New("watchtree metrics: Attach called twice: a Metrics reads one runtime")

// Options configure New. The zero value means the defaults.
type Options struct {
	// Namespace prefixes every metric name. Default "watchtree".
	Namespace string
	// Buckets are the handler duration histogram's buckets, in seconds. Default from 1ms to
	// 10s (prometheus.ExponentialBuckets(0.001, 2.5, 11)).
	Buckets []float64
	// ScrapeTimeout bounds the reads of one scrape, all from memory (the streams' supervisors
	// answer in microseconds; a refresh of the server's figures is waited for at most 50ms).
	// Default 5s.
	ScrapeTimeout time.Duration
}

// Metrics is the adapter; see the package documentation. It is safe for concurrent use.
type Metrics struct {
	opts Options

	retries, deadLetters, dropped, checkpoints, checkpointFailures, checkpointRefusals *prom.CounterVec
	historyLost, gaps, deadLetterFailures                                              *prom.CounterVec
	stops, cursorChanges                                                               *prom.CounterVec
	handler                                                                            *prom.HistogramVec

	events, restarts, state, role, lag, inFlight, attempt, backlog, cpAge, headroom, observerDropped *prom.Desc
	leaseEpoch, leaseAcquisitions, leaseLosses, leaseHandovers, leaseFenced, buildInfo, reachable    *prom.Desc

	version string // watchtree's module version, for build_info

	mu     sync.Mutex
	src    Source
	known  map[string]bool           // streams whose counters have their zero series
	cpAges *watchtree.CheckpointAges // checkpoint_age_seconds, defined once for both adapters
}

var (
	_ observe.Observer        = (*Metrics)(nil)
	_ observe.HandlerObserver = (*Metrics)(nil)
	_ prom.Collector          = (*Metrics)(nil)
)

// notCounted are the event kinds OnEvent counts nothing for, each with the reason: every other
// kind changes a counter. A new kind must go to one or the other (the package's test checks
// that every kind of observe.Kinds is in exactly one). One fact has one counter: what the
// runtime's status counts is read from it at each scrape, not counted again from events.
var notCounted = map[observe.Kind]string{
	observe.KindStarted:           "a start is the stream_state gauge (running) and restarts_total counts the restarts",
	observe.KindRestarted:         "restarts_total is read from the supervisor's count at each scrape: every restart, also those of a crash loop that never came up (Restarted reports only the successful ones)",
	observe.KindSkipped:           "a skip is events_total{outcome=\"skipped\"}, read from the status at each scrape",
	observe.KindInvalidated:       "an invalidate that stops the stream is counted in stops_total (crashed, terminal); one that reopens is not a failure",
	observe.KindLeadershipChanged: "leadership is the stream_role gauge and the lease_* series, read from the status at each scrape",
	observe.KindSnapshotStarted:   "a snapshot is the stream_state gauge (snapshotting); its documents are handler calls (handler_duration_seconds)",
	observe.KindSnapshotResumed:   "as SnapshotStarted",
	observe.KindSnapshotProgress:  "progress is a status, not a count: Runtime.Streams reports it",
	observe.KindSnapshotDone:      "as SnapshotStarted",
	observe.KindNamespaceMissing:  "a warning with a state, repeated every minute while it holds: StreamStatus.Warnings and the console's note carry it",
}

// New returns the adapter. Attach the runtime before the first scrape; the Observer counters
// count from New on.
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
		version:            watchtree.Version(),
		known:              map[string]bool{},
		cpAges:             watchtree.NewCheckpointAges(),
		retries:            counter("retries_total", "Handler attempts that failed and were scheduled for a retry."),
		deadLetters:        counter("dead_letters_total", "Events dead-lettered (record durably written)."),
		dropped:            counter("events_dropped_total", "Events whose attempts ran out with dead letters disabled (lost)."),
		deadLetterFailures: counter("dead_letter_failures_total", "Failed dead-letter writes (retried; the event stays unsettled)."),
		stops:              counter("stops_total", "Stops of the stream, by reason (graceful, crashed) and whether terminal.", "reason", "terminal"),
		checkpoints:        counter("checkpoints_total", "Checkpoints written."),
		checkpointFailures: counter("checkpoint_failures_total", "Failed checkpoint writes (retried)."),
		checkpointRefusals: counter("checkpoint_refused_total", "Checkpoint writes the store refused because their position sorts before the stored one (the stored one stands)."),
		historyLost:        counter("history_lost_total", "Saved positions no longer in the oplog."),
		gaps:               counter("gaps_total", "Gap records written (history skipped on purpose)."),
		cursorChanges:      counter("cursor_changes_total", "Moves of a Shared stream to the shared cursor (to=attached) or off it, to catch up on a cursor of its own (to=detached).", "to"),
		handler: prom.NewHistogramVec(prom.HistogramOpts{Namespace: ns, Name: "handler_duration_seconds",
			Help: "Duration of each handler call (every attempt), by result (ok, error).", Buckets: o.Buckets}, []string{"stream", "result"}),
		events:            desc("events_total", "Events settled since the stream's tree spawned, by outcome (handled, filtered, unhandled, skipped, dead_lettered).", "outcome"),
		restarts:          desc("restarts_total", "Restarts of the stream by its RestartPolicy since its tree spawned: every one, also those of a crash loop that did not come up."),
		state:             desc("stream_state", "1 for the stream's current state, 0 for the others.", "state"),
		role:              desc("stream_role", "1 for the stream's role on this instance: leader, standby, idle (a SingleLeader stream down here), or all-instances.", "role"),
		lag:               desc("stream_lag_seconds", "Now minus the cluster time of the newest position the stream has read; not exported for a standby, which reads nothing."),
		inFlight:          desc("stream_in_flight", "Events accepted by the dispatcher and not settled."),
		attempt:           desc("stream_restart_attempt", "Deaths since the last successful resubscription (0 when healthy)."),
		backlog:           desc("dead_letter_backlog", "Unexpired dead letters in the stream's store, as last counted (left out while the count is not current, e.g. MongoDB unreachable)."),
		cpAge:             desc("checkpoint_age_seconds", "How long the oldest settled event not yet in the stored checkpoint has waited for a write; 0 when the stored checkpoint covers every settled event (an idle stream has nothing unsaved)."),
		headroom:          desc("token_headroom_seconds", "The saved token's cluster time minus the oldest oplog entry's (when the oplog window is current); near 0 means history is about to be lost."),
		leaseEpoch:        desc("lease_epoch", "A SingleLeader stream's lease epoch as this instance last saw it."),
		leaseAcquisitions: desc("lease_acquisitions_total", "Leaderships this instance won, since the stream's tree spawned."),
		leaseLosses:       desc("lease_losses_total", "Leaderships this instance lost (expired, refused renewal, fenced), since the stream's tree spawned."),
		leaseHandovers:    desc("lease_handovers_total", "Leaderships this instance handed over for balance, since the stream's tree spawned."),
		leaseFenced:       desc("lease_fenced_writes_total", "Writes of this instance refused because a newer lease epoch holds, since the stream's tree spawned."),
		observerDropped:   prom.NewDesc(prom.BuildFQName(ns, "", "observer_dropped_total"), "Observer events dropped because the Observer fell behind.", nil, nil),
		reachable:         prom.NewDesc(prom.BuildFQName(ns, "", "mongodb_reachable"), "1 while MongoDB answers the runtime's reads, 0 while it does not (the figures that need it are then left out).", nil, nil),
		buildInfo:         prom.NewDesc(prom.BuildFQName(ns, "", "build_info"), "1, labelled with watchtree's module version and the Go version of the binary.", []string{"version", "go_version"}, nil),
	}
}

// Attach sets the runtime the scrapes read. It returns an error for a nil src, and ErrAttached
// when m already reads one.
func (m *Metrics) Attach(src Source) error {
	if src == nil {
		return errors.New("watchtree metrics: Attach(nil): give the runtime to read")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.src != nil {
		return ErrAttached
	}
	m.src = src
	return nil
}

// zero gives every counter of stream its series at 0, once.
func (m *Metrics) zero(stream string) {
	m.mu.Lock()
	seen := m.known[stream]
	m.known[stream] = true
	m.mu.Unlock()
	if seen {
		return
	}
	for _, c := range []*prom.CounterVec{m.retries, m.deadLetters, m.dropped, m.deadLetterFailures, m.checkpoints,
		m.checkpointFailures, m.checkpointRefusals, m.historyLost, m.gaps} {
		c.WithLabelValues(stream)
	}
	m.stops.WithLabelValues(stream, observe.Graceful.String(), "false")
	m.stops.WithLabelValues(stream, observe.Crashed.String(), "false")
	m.stops.WithLabelValues(stream, observe.Crashed.String(), "true")
	m.handler.WithLabelValues(stream, "ok")
	m.handler.WithLabelValues(stream, "error")
	m.cursorChanges.WithLabelValues(stream, "attached")
	m.cursorChanges.WithLabelValues(stream, "detached")
}

// OnEvent implements observe.Observer: it counts the event, unless its kind is in notCounted.
func (m *Metrics) OnEvent(ev observe.Event) {
	s := ev.EventMeta().Stream
	if s != "" {
		m.zero(s)
	}
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
	case observe.Stopped:
		m.stops.WithLabelValues(s, e.Reason.String(), strconv.FormatBool(e.Terminal)).Inc()
	case observe.Checkpointed:
		m.checkpoints.WithLabelValues(s).Inc()
		m.cpAges.OnEvent(ev)
	case observe.CheckpointFailed:
		m.checkpointFailures.WithLabelValues(s).Inc()
		m.cpAges.OnEvent(ev)
	case observe.CheckpointRefused:
		m.checkpointRefusals.WithLabelValues(s).Inc()
	case observe.HistoryLost:
		m.historyLost.WithLabelValues(s).Inc()
	case observe.GapRecorded:
		m.gaps.WithLabelValues(s).Inc()
	case observe.CursorChanged:
		to := "detached"
		if e.Attached {
			to = "attached"
		}
		m.cursorChanges.WithLabelValues(s, to).Inc()
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
	return []prom.Collector{m.retries, m.deadLetters, m.dropped, m.deadLetterFailures,
		m.stops, m.checkpoints, m.checkpointFailures, m.checkpointRefusals, m.historyLost, m.gaps, m.handler, m.cursorChanges}
}

func (m *Metrics) descs() []*prom.Desc {
	return []*prom.Desc{m.events, m.restarts, m.state, m.role, m.lag, m.inFlight, m.attempt, m.backlog, m.cpAge, m.headroom,
		m.observerDropped, m.leaseEpoch, m.leaseAcquisitions, m.leaseLosses, m.leaseHandovers, m.leaseFenced, m.buildInfo, m.reachable}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prom.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	for _, d := range m.descs() {
		ch <- d
	}
}

// states are every state a stream reports, for the state gauge's zeroes.
var states = []watchtree.StreamState{watchtree.StateStarting, watchtree.StateStandby, watchtree.StateSnapshotting,
	watchtree.StateRunning, watchtree.StateBackoff, watchtree.StateStopping, watchtree.StateStopped, watchtree.StateCrashed}

// Collect implements prometheus.Collector: build_info, the Observer counters, then the state
// read now from memory. A Metrics never attached adds an invalid metric (ErrNotAttached), which
// fails the scrape.
func (m *Metrics) Collect(ch chan<- prom.Metric) {
	ch <- prom.MustNewConstMetric(m.buildInfo, prom.GaugeValue, 1, m.version, runtime.Version())
	m.mu.Lock()
	src := m.src
	m.mu.Unlock()
	if src == nil {
		for _, c := range m.vecs() {
			c.Collect(ch)
		}
		ch <- prom.NewInvalidMetric(m.reachable, ErrNotAttached)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
	defer cancel()
	sts, _ := src.Streams(ctx) // the streams that answered
	for _, st := range sts {
		m.zero(st.Name) // before the counters are collected: a stream's series exist from its first scrape
	}
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	ch <- prom.MustNewConstMetric(m.observerDropped, prom.CounterValue, float64(src.ObserverStats().Dropped))
	rd := src.Readings(ctx)
	up := 1.0
	if rd.Unreachable != "" {
		up = 0
	}
	ch <- prom.MustNewConstMetric(m.reachable, prom.GaugeValue, up)
	now := time.Now()
	for _, st := range sts {
		n := st.Name
		for outcome, v := range map[string]uint64{"handled": st.Handled, "filtered": st.Filtered, "unhandled": st.Unhandled,
			"skipped": st.Skipped, "dead_lettered": st.DeadLettered} {
			ch <- prom.MustNewConstMetric(m.events, prom.CounterValue, float64(v), n, outcome)
		}
		ch <- prom.MustNewConstMetric(m.restarts, prom.CounterValue, float64(st.Restarts), n)
		for _, s := range states {
			v := 0.0
			if st.State == s {
				v = 1
			}
			ch <- prom.MustNewConstMetric(m.state, prom.GaugeValue, v, n, string(s))
		}
		role := st.Role()
		ch <- prom.MustNewConstMetric(m.role, prom.GaugeValue, 1, n, role)
		standby := role == "standby" || (st.Lease != nil && st.Lease.Role == watchtree.RoleStandby)
		if !st.ReadThrough.IsZero() && !standby { // a standby reads nothing: its position is its last term's
			ch <- prom.MustNewConstMetric(m.lag, prom.GaugeValue, max(now.Sub(st.ReadThrough).Seconds(), 0), n)
		}
		ch <- prom.MustNewConstMetric(m.inFlight, prom.GaugeValue, float64(st.InFlight), n)
		ch <- prom.MustNewConstMetric(m.attempt, prom.GaugeValue, float64(st.Attempt), n)
		if l := st.Lease; l != nil {
			ch <- prom.MustNewConstMetric(m.leaseEpoch, prom.GaugeValue, float64(l.Epoch), n)
			ch <- prom.MustNewConstMetric(m.leaseAcquisitions, prom.CounterValue, float64(l.Acquisitions), n)
			ch <- prom.MustNewConstMetric(m.leaseLosses, prom.CounterValue, float64(l.Losses), n)
			ch <- prom.MustNewConstMetric(m.leaseHandovers, prom.CounterValue, float64(l.HandOvers), n)
			ch <- prom.MustNewConstMetric(m.leaseFenced, prom.CounterValue, float64(l.Fenced), n)
		}
		if c, ok := rd.DeadLetters[n]; ok && c.Unknown == "" {
			ch <- prom.MustNewConstMetric(m.backlog, prom.GaugeValue, float64(c.N), n)
		}
		if !st.CheckpointAt.IsZero() {
			ch <- prom.MustNewConstMetric(m.cpAge, prom.GaugeValue, m.cpAges.Age(st, now), n)
		}
		if at, ok := watchtree.TokenClusterTime(st.Checkpoint); ok && rd.Oplog.Unknown == "" && !rd.Oplog.Oldest.IsZero() {
			ch <- prom.MustNewConstMetric(m.headroom, prom.GaugeValue, at.Sub(rd.Oplog.Oldest).Seconds(), n)
		}
	}
}
