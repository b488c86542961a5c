package prometheus_test

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree"
	wtprom "github.com/watchtree/watchtree/metrics/prometheus"
	"github.com/watchtree/watchtree/observe/observetest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// Pay is the outage test's document.
type Pay struct {
	ID int64 `bson:"_id"`
}

// scrape serves the registry over HTTP and parses the text exposition.
func scrape(t *testing.T, reg *prom.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// value returns the value of the series of name whose labels include want; ok false if none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestScrapeAfterARetryADeadLetterARestartAndALeaderChange runs observetest's scenario with the
// adapter: a retry (order 1 fails once), a dead letter (order 2 always fails), a restart (a
// getMore fails with a non-resumable error) and a SingleLeader stream that acquires its lease
// and stops. It checks names, labels and values of the exposition, the lease series while the
// stream leads.
func TestScrapeAfterARetryADeadLetterARestartAndALeaderChange(t *testing.T) {
	m := wtprom.New(wtprom.Options{})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	var leading map[string]*dto.MetricFamily
	sc := observetest.Run(t, observetest.Options{Observer: m, Attach: func(rt *watchtree.Runtime) error { return m.Attach(rt) },
		WhileLeading: func() {
			observetest.WaitFor(t, "the leader's series", func() bool {
				leading = scrape(t, reg)
				v, _ := value(leading, "watchtree_stream_role", map[string]string{"stream": "lead", "role": "leader"})
				return v == 1
			})
		}})
	lead := map[string]string{"stream": "lead"}
	if v, ok := value(leading, "watchtree_lease_acquisitions_total", lead); !ok || v != 1 {
		t.Errorf("watchtree_lease_acquisitions_total{stream=lead} = %v (present %v) while it leads, want 1", v, ok)
	}
	if v, ok := value(leading, "watchtree_lease_epoch", lead); !ok || v < 1 {
		t.Errorf("watchtree_lease_epoch{stream=lead} = %v (present %v) while it leads, want at least 1", v, ok)
	}
	var fams map[string]*dto.MetricFamily
	observetest.WaitFor(t, "the observer's restart", func() bool {
		fams = scrape(t, reg)
		v, _ := value(fams, "watchtree_restarts_total", map[string]string{"stream": "pay"})
		return v == 1
	})
	pay := func(kv ...string) map[string]string {
		l := map[string]string{"stream": "pay"}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	exact := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"watchtree_retries_total", pay(), 2}, // order 1's first attempt, order 2's first attempt
		{"watchtree_dead_letters_total", pay(), 1},
		{"watchtree_restarts_total", pay(), 1},
		{"watchtree_stops_total", pay("reason", "crashed", "terminal", "false"), 1},
		{"watchtree_events_total", pay("outcome", "handled"), 1},
		{"watchtree_events_total", pay("outcome", "dead_lettered"), 1},
		{"watchtree_events_total", pay("outcome", "filtered"), 0},
		{"watchtree_stream_state", pay("state", "running"), 1},
		{"watchtree_stream_state", pay("state", "crashed"), 0},
		{"watchtree_stream_role", pay("role", "all-instances"), 1},
		{"watchtree_stream_restart_attempt", pay(), 0},
		{"watchtree_stream_in_flight", pay(), 0},
		{"watchtree_dead_letter_backlog", pay(), 1},
		{"watchtree_handler_duration_seconds", pay("result", "error"), 3},
		{"watchtree_handler_duration_seconds", pay("result", "ok"), 1},
		{"watchtree_observer_dropped_total", nil, 0},
	}
	for _, c := range exact {
		if got, ok := value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	for _, name := range []string{"watchtree_checkpoints_total", "watchtree_stream_lag_seconds", "watchtree_checkpoint_age_seconds"} {
		if v, ok := value(fams, name, pay()); !ok || v < 0 || (name == "watchtree_checkpoints_total" && v < 1) {
			t.Errorf("%s = %v (present %v)", name, v, ok)
		}
	}
	if f := fams["watchtree_handler_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("handler duration type %v", f.GetType())
	}
	rd := sc.Runtime.Readings(context.Background())
	if _, ok := value(fams, "watchtree_token_headroom_seconds", pay()); ok != (rd.Oplog.Unknown == "") {
		t.Errorf("token headroom present %v, but the oplog window reads %q", ok, rd.Oplog.Unknown)
	}
}

// TestScrapeDuringAnOutage: with MongoDB frozen, a scrape answers from memory well within its
// timeout, mongodb_reachable reads 0 and the dead-letter backlog (which needs the server) is
// left out while the state gauges stay. Before, every scrape waited for ScrapeTimeout (5s). The
// bound is generous for a loaded machine; a scrape takes about 50ms.
func TestScrapeDuringAnOutage(t *testing.T) {
	if os.Getenv("WATCHTREE_MONGODB_URI") != "" {
		t.Skip("freezes mongosim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), observetest.Wait)
	defer cancel()
	srv, err := mongosim.Start(ctx, mongosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	rt, reg := startAttached(t, ctx, watchtree.Config{Client: client, Database: "wt_prom_outage", ShutdownTimeout: time.Second})
	if _, err := rt.Spawn(ctx, watchtree.Stream[Pay]{Name: "pay", Collection: "pay",
		OnInsert: func(context.Context, *watchtree.Event[Pay]) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	pay := map[string]string{"stream": "pay"}
	observetest.WaitFor(t, "the backlog counted", func() bool {
		_, ok := value(scrape(t, reg), "watchtree_dead_letter_backlog", pay)
		return ok
	})
	srv.Pause()
	t.Cleanup(srv.Resume)
	var fams map[string]*dto.MetricFamily
	observetest.WaitFor(t, "mongodb_reachable 0", func() bool {
		start := time.Now()
		fams = scrape(t, reg)
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("a scrape took %v with MongoDB frozen", took)
		}
		v, ok := value(fams, "watchtree_mongodb_reachable", nil)
		return ok && v == 0
	})
	if v, ok := value(fams, "watchtree_dead_letter_backlog", pay); ok {
		t.Errorf("dead_letter_backlog %v exported while MongoDB does not answer", v)
	}
	if v, ok := value(fams, "watchtree_stream_state", map[string]string{"stream": "pay", "state": "running"}); !ok || v != 1 {
		t.Errorf("stream_state{running} = %v (present %v): the states are in memory", v, ok)
	}
}

// startAttached starts a runtime of cfg with a new Metrics as its Observer, attached to it and
// registered in the registry it returns; the runtime stops when the test ends.
func startAttached(t *testing.T, ctx context.Context, cfg watchtree.Config) (*watchtree.Runtime, *prom.Registry) {
	t.Helper()
	m := wtprom.New(wtprom.Options{})
	cfg.Observer = m
	rt, err := watchtree.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	if err := m.Attach(rt); err != nil {
		t.Fatal(err)
	}
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	return rt, reg
}
