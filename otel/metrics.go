package otel

import (
	"context"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/watchtree/watchtree"

	"github.com/watchtree/watchtree/observe"
)

// The metric names. Each has the meaning of the Prometheus adapter's metric named beside it
// (watchtree_ prefix left out); OpenTelemetry names carry no unit or _total suffix, the unit is
// the instrument's.
const (
	metricProcessDuration   = "messaging.process.duration"         // handler_duration_seconds
	metricConsumed          = "messaging.client.consumed.messages" // events_total
	metricRetries           = "watchtree.retries"                  // retries_total
	metricDeadLetters       = "watchtree.dead_letters"             // dead_letters_total
	metricDropped           = "watchtree.events.dropped"           // events_dropped_total
	metricDeadLetterFailed  = "watchtree.dead_letter.failures"     // dead_letter_failures_total
	metricSkipped           = "watchtree.skipped"                  // skipped_total
	metricRestarts          = "watchtree.restarts"                 // restarts_total
	metricStops             = "watchtree.stops"                    // stops_total
	metricCheckpoints       = "watchtree.checkpoints"              // checkpoints_total
	metricCheckpointFailed  = "watchtree.checkpoint.failures"      // checkpoint_failures_total
	metricCheckpointRefused = "watchtree.checkpoint.refused"       // checkpoint_refused_total
	metricHistoryLost       = "watchtree.history_lost"             // history_lost_total
	metricGaps              = "watchtree.gaps"                     // gaps_total
	metricLeadership        = "watchtree.leadership.changes"       // (none: Prometheus has the role gauge only)
	metricCursorChanges     = "watchtree.cursor.changes"           // cursor_changes_total
	metricState             = "watchtree.stream.state"             // stream_state
	metricRole              = "watchtree.stream.role"              // stream_role
	metricLag               = "watchtree.stream.lag"               // stream_lag_seconds
	metricInFlight          = "watchtree.stream.in_flight"         // stream_in_flight
	metricRestartAttempt    = "watchtree.stream.restart_attempt"   // stream_restart_attempt
	metricBacklog           = "watchtree.dead_letter.backlog"      // dead_letter_backlog
	metricCheckpointAge     = "watchtree.checkpoint.age"           // checkpoint_age_seconds
	metricHeadroom          = "watchtree.token.headroom"           // token_headroom_seconds
	metricObserverDropped   = "watchtree.observer.dropped"         // observer_dropped_total
)

// instruments are the adapter's metrics.
type instruments struct {
	process                                                                        metric.Float64Histogram
	retries, deadLetters, dropped, deadLetterFailed, skipped                       metric.Int64Counter
	restarts, stops, checkpoints, checkpointFailed, checkpointRefused, historyLost metric.Int64Counter
	gaps, leadership, cursorChanges                                                metric.Int64Counter
	consumed, observerDropped                                                      metric.Int64ObservableCounter
	state, role, inFlight, restartAttempt, backlog                                 metric.Int64ObservableGauge
	lag, checkpointAge, headroom                                                   metric.Float64ObservableGauge
}

func defaultBuckets() []float64 {
	b := make([]float64, 11)
	for i := range b {
		b[i] = 0.001 * math.Pow(2.5, float64(i))
	}
	return b
}

// make creates every instrument on meter; the first error is returned.
func (in *instruments) make(meter metric.Meter, buckets []float64) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	seconds := func(name, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	var err error
	in.process, err = meter.Float64Histogram(metricProcessDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each handler call (every attempt); error.type is set when it failed."),
		metric.WithExplicitBucketBoundaries(buckets...))
	errs = append(errs, err)
	in.retries = counter(metricRetries, "{attempt}", "Handler attempts that failed and were scheduled for a retry.")
	in.deadLetters = counter(metricDeadLetters, "{event}", "Events dead-lettered (record durably written).")
	in.dropped = counter(metricDropped, "{event}", "Events whose attempts ran out with dead letters disabled (lost).")
	in.deadLetterFailed = counter(metricDeadLetterFailed, "{write}", "Failed dead-letter writes (retried; the event stays unsettled).")
	in.skipped = counter(metricSkipped, "{event}", "Events settled on purpose by a Skip error.")
	in.restarts = counter(metricRestarts, "{restart}", "Successful restarts of the stream after a crash.")
	in.stops = counter(metricStops, "{stop}", "Stops of the stream, by watchtree.stop.reason (graceful, crashed) and watchtree.terminal.")
	in.checkpoints = counter(metricCheckpoints, "{write}", "Checkpoints written.")
	in.checkpointFailed = counter(metricCheckpointFailed, "{write}", "Failed checkpoint writes (retried).")
	in.checkpointRefused = counter(metricCheckpointRefused, "{write}", "Checkpoint writes the store refused because their position sorts before the stored one (the stored one stands).")
	in.historyLost = counter(metricHistoryLost, "{event}", "Saved positions no longer in the oplog.")
	in.gaps = counter(metricGaps, "{gap}", "Gap records written (history skipped on purpose).")
	in.leadership = counter(metricLeadership, "{change}", "Leadership changes of a SingleLeader stream on this instance, by watchtree.lease.change.")
	in.cursorChanges = counter(metricCursorChanges, "{change}", "Moves of a Shared stream to the shared cursor (watchtree.cursor.to=attached) or off it, to catch up on a cursor of its own (detached).")
	in.consumed, err = meter.Int64ObservableCounter(metricConsumed, metric.WithUnit("{message}"),
		metric.WithDescription("Events settled since the stream's tree spawned, by watchtree.outcome (handled, filtered, unhandled, skipped, dead_lettered)."))
	errs = append(errs, err)
	in.observerDropped, err = meter.Int64ObservableCounter(metricObserverDropped, metric.WithUnit("{event}"),
		metric.WithDescription("Observer events dropped because the Observer fell behind."))
	errs = append(errs, err)
	in.state = gauge(metricState, "1", "1 for the stream's current watchtree.state, 0 for the others.")
	in.role = gauge(metricRole, "1", "1 for the stream's watchtree.role on this instance: leader, standby, idle (a SingleLeader stream down here), or all-instances.")
	in.inFlight = gauge(metricInFlight, "{event}", "Events accepted by the dispatcher and not settled.")
	in.restartAttempt = gauge(metricRestartAttempt, "{attempt}", "Deaths since the last successful resubscription (0 when healthy).")
	in.backlog = gauge(metricBacklog, "{event}", "Unexpired dead letters in the stream's store.")
	in.lag = seconds(metricLag, "Now minus the cluster time of the newest position the stream has read.")
	in.checkpointAge = seconds(metricCheckpointAge, "How long the oldest settled event not yet in the stored checkpoint has waited for a write; 0 when the stored checkpoint covers every settled event.")
	in.headroom = seconds(metricHeadroom, "The saved token's cluster time minus the oldest oplog entry's (when the oplog is readable); near 0 means history is about to be lost.")
	return errors.Join(errs...)
}

func (in *instruments) observables() []metric.Observable {
	return []metric.Observable{in.consumed, in.observerDropped, in.state, in.role, in.inFlight, in.restartAttempt,
		in.backlog, in.lag, in.checkpointAge, in.headroom}
}

// zero gives every counter of stream its points at 0, once: the counters the Prometheus adapter
// gives series at 0 (retries, dead letters, dropped events, dead-letter failures, checkpoints,
// checkpoint failures and refusals, history lost, gaps, and the stops by reason and terminal),
// and skipped and restarts, which are counters here (Prometheus reads them from the status).
// Leadership changes, which have no Prometheus counter, and the handler histogram (a point
// needs a call) appear with their first event.
func (t *Telemetry) zero(stream string) {
	t.mu.Lock()
	seen := t.known[stream]
	t.known[stream] = true
	t.mu.Unlock()
	if seen {
		return
	}
	ctx := context.Background()
	in := &t.inst
	n := attrStream.String(stream)
	for _, c := range []metric.Int64Counter{in.retries, in.deadLetters, in.dropped, in.deadLetterFailed, in.skipped,
		in.restarts, in.checkpoints, in.checkpointFailed, in.checkpointRefused, in.historyLost, in.gaps} {
		c.Add(ctx, 0, metric.WithAttributes(n))
	}
	for _, s := range []struct {
		reason   observe.StopReason
		terminal bool
	}{{observe.Graceful, false}, {observe.Crashed, false}, {observe.Crashed, true}} {
		in.stops.Add(ctx, 0, metric.WithAttributes(n, attribute.String("watchtree.stop.reason", s.reason.String()), attrTerminal.Bool(s.terminal)))
	}
	for _, to := range []string{"attached", "detached"} {
		in.cursorChanges.Add(ctx, 0, metric.WithAttributes(n, attribute.String("watchtree.cursor.to", to)))
	}
}

// count adds ev to its counter, if it has one.
func (t *Telemetry) count(ev observe.Event) {
	ctx := context.Background()
	if stream := ev.EventMeta().Stream; stream != "" {
		t.zero(stream)
	}
	s := metric.WithAttributes(attrStream.String(ev.EventMeta().Stream))
	in := &t.inst
	switch e := ev.(type) {
	case observe.RetryScheduled:
		in.retries.Add(ctx, 1, s)
	case observe.DeadLettered:
		if e.Dropped {
			in.dropped.Add(ctx, 1, s)
		} else {
			in.deadLetters.Add(ctx, 1, s)
		}
	case observe.DeadLetterFailed:
		in.deadLetterFailed.Add(ctx, 1, s)
	case observe.Skipped:
		in.skipped.Add(ctx, 1, s)
	case observe.Restarted:
		in.restarts.Add(ctx, 1, s)
	case observe.Stopped:
		in.stops.Add(ctx, 1, metric.WithAttributes(attrStream.String(e.Stream),
			attribute.String("watchtree.stop.reason", e.Reason.String()), attrTerminal.Bool(e.Terminal)))
	case observe.Checkpointed:
		in.checkpoints.Add(ctx, 1, s)
		t.cpAges.OnEvent(ev)
	case observe.CheckpointFailed:
		in.checkpointFailed.Add(ctx, 1, s)
		t.cpAges.OnEvent(ev)
	case observe.CheckpointRefused:
		in.checkpointRefused.Add(ctx, 1, s)
	case observe.HistoryLost:
		in.historyLost.Add(ctx, 1, s)
	case observe.GapRecorded:
		in.gaps.Add(ctx, 1, s)
	case observe.LeadershipChanged:
		in.leadership.Add(ctx, 1, metric.WithAttributes(attrStream.String(e.Stream), attrChange.String(string(e.Change))))
	case observe.CursorChanged:
		to := "detached"
		if e.Attached {
			to = "attached"
		}
		in.cursorChanges.Add(ctx, 1, metric.WithAttributes(attrStream.String(e.Stream), attribute.String("watchtree.cursor.to", to)))
	}
}

// states are every state a stream reports, for the state gauge's zeroes.
var states = []watchtree.StreamState{watchtree.StateStarting, watchtree.StateStandby, watchtree.StateSnapshotting,
	watchtree.StateRunning, watchtree.StateBackoff, watchtree.StateStopping, watchtree.StateStopped, watchtree.StateCrashed}

// collect is the collection callback: it reads the attached runtime's state, bounded by
// CollectTimeout; a runtime that does not answer in time gives the streams that did.
func (t *Telemetry) collect(ctx context.Context, o metric.Observer) error {
	t.mu.Lock()
	src := t.src
	t.mu.Unlock()
	if src == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.CollectTimeout)
	defer cancel()
	in := &t.inst
	o.ObserveInt64(in.observerDropped, int64(src.ObserverStats().Dropped))
	sts, _ := src.Streams(ctx) // the streams that answered
	oldest, _, oerr := src.OplogWindow(ctx)
	now := time.Now()
	for _, st := range sts {
		t.zero(st.Name) // a stream spawned after Attach, with no event yet (the SDK reads the counters after the callbacks)
		n := attrStream.String(st.Name)
		for outcome, v := range map[string]uint64{"handled": st.Handled, "filtered": st.Filtered, "unhandled": st.Unhandled,
			"skipped": st.Skipped, "dead_lettered": st.DeadLettered} {
			o.ObserveInt64(in.consumed, int64(v), metric.WithAttributes(n, attribute.String("watchtree.outcome", outcome)))
		}
		for _, s := range states {
			v := int64(0)
			if st.State == s {
				v = 1
			}
			o.ObserveInt64(in.state, v, metric.WithAttributes(n, attribute.String("watchtree.state", string(s))))
		}
		o.ObserveInt64(in.role, 1, metric.WithAttributes(n, attribute.String("watchtree.role", st.Role())))
		if !st.ReadThrough.IsZero() {
			o.ObserveFloat64(in.lag, max(now.Sub(st.ReadThrough).Seconds(), 0), metric.WithAttributes(n))
		}
		o.ObserveInt64(in.inFlight, int64(st.InFlight), metric.WithAttributes(n))
		o.ObserveInt64(in.restartAttempt, int64(st.Attempt), metric.WithAttributes(n))
		if c, err := src.CountDeadLetters(ctx, st.Name); err == nil {
			o.ObserveInt64(in.backlog, int64(c), metric.WithAttributes(n))
		}
		if !st.CheckpointAt.IsZero() {
			age := t.cpAges.Age(st, now)
			o.ObserveFloat64(in.checkpointAge, age, metric.WithAttributes(n))
		}
		if at, ok := watchtree.TokenClusterTime(st.Checkpoint); ok && oerr == nil {
			o.ObserveFloat64(in.headroom, at.Sub(oldest).Seconds(), metric.WithAttributes(n))
		}
	}
	return nil
}
