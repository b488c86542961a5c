// Command dashrender renders dashboards/watchtree.json from a real run into a PNG
// (docs/dashboard.png; `make dashboard-png`). Grafana is not needed: it draws an equivalent
// page itself.
//
// It starts mongosim and two watchtree instances with the Prometheus adapter, each serving
// /metrics, and drives streams through steady inserts, retries, dead letters, lag-building
// bursts, restarts, a RestartPolicy that gives up, and leader changes of a SingleLeader stream.
// A Prometheus server of its own (a temporary directory, a free port) scrapes both instances.
// Then every panel's own PromQL targets are evaluated over the run through Prometheus's HTTP
// API (query_range; instant targets at the end), with the dashboard's variables expanded as
// Grafana does (All streams; $__rate_interval from the scrape interval). The page places the
// panels by gridPos, draws time series as SVG lines with legends from legendFormat, stat panels
// as the last value and tables from the series' labels, in the panel's unit. Headless chromium
// screenshots it.
//
// It needs the prometheus and chromium executables (Debian packages prometheus and chromium)
// and fails naming the package when one is missing. Every process it starts is stopped, and
// the temporary directory removed, on success, failure or interrupt (SIGINT, SIGTERM).
//
//	go run ./internal/cmd/dashrender -duration 150s -out ../../docs/dashboard.png
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// flags are the command's options.
type flags struct {
	dashboard string        // the dashboard JSON
	out       string        // the PNG written
	html      string        // also keep the HTML page here, when set
	duration  time.Duration // how long the workload runs
	scrape    time.Duration // Prometheus's scrape interval, also the query step
	width     int           // page width in CSS pixels
}

func main() {
	var o flags
	flag.StringVar(&o.dashboard, "dashboard", "../../dashboards/watchtree.json", "the Grafana dashboard to render")
	flag.StringVar(&o.out, "out", "../../docs/dashboard.png", "the PNG to write")
	flag.StringVar(&o.html, "html", "", "also write the rendered HTML page here")
	flag.DurationVar(&o.duration, "duration", 150*time.Second, "how long the workload runs (the dashboard's time range)")
	flag.DurationVar(&o.scrape, "scrape", time.Second, "Prometheus scrape interval and query step")
	flag.IntVar(&o.width, "width", 1600, "page width in CSS pixels")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashrender:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dashrender: "+format+"\n", args...)
}

// run renders the dashboard; every deferred cleanup runs before it returns.
func run(ctx context.Context, o flags) error {
	switch {
	case o.duration < 30*time.Second:
		return fmt.Errorf("-duration %v: at least 30s, for the scripted faults to have room", o.duration)
	case o.scrape < 100*time.Millisecond || o.scrape > o.duration/20:
		return fmt.Errorf("-scrape %v: between 100ms and a twentieth of -duration", o.scrape)
	case o.width < 800:
		return fmt.Errorf("-width %d: at least 800", o.width)
	}
	promBin, err := prometheusTool.find()
	if err != nil {
		return err
	}
	chromeBin, err := chromiumTool.find()
	if err != nil {
		return err
	}
	d, err := loadDashboard(o.dashboard)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dashrender-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	w, err := startWorkload(ctx)
	if err != nil {
		return err
	}
	defer w.close()
	ps, err := startPrometheus(ctx, promBin, dir, o.scrape, w.targets())
	if err != nil {
		return err
	}
	defer ps.proc.stop()
	if err := waitTargetsUp(ctx, ps, len(w.targets())); err != nil {
		return err
	}
	from := time.Now().Truncate(time.Second)
	logf("running the workload for %v (Prometheus on %s, instances %v)", o.duration, ps.base, w.targets())
	if err := w.run(ctx, o.duration, logf); err != nil {
		return err
	}
	// Two more scrapes, so that the last moments of the run are in Prometheus.
	if err := pause(ctx, 2*o.scrape); err != nil {
		return err
	}
	to := time.Now().Truncate(time.Second)
	iv := interval{Step: o.scrape, Scrape: o.scrape, Range: to.Sub(from)}
	data, err := evaluate(ctx, ps, d, from, to, iv)
	if err != nil {
		return err
	}
	for i, pd := range data {
		if pd.Err != "" {
			return fmt.Errorf("panel %q: %s", d.Panels[i].Title, pd.Err)
		}
	}
	version, err := ps.version(ctx)
	if err != nil {
		return err
	}
	w.close()
	ps.proc.stop()

	pg := page{Title: d.Title, From: from, To: to, Step: iv.Step, Panels: d.Panels, Data: data, Width: o.width,
		Source: fmt.Sprintf("rendered from a %v run on mongosim (2 instances) by dashrender: every panel's PromQL through Prometheus %s, step %v",
			o.duration, version, iv.Step)}
	htmlPage, height := renderHTML(pg)
	pagePath := filepath.Join(dir, "dashboard.html")
	if err := os.WriteFile(pagePath, []byte(htmlPage), 0o644); err != nil {
		return err
	}
	if o.html != "" {
		if err := os.WriteFile(o.html, []byte(htmlPage), 0o644); err != nil {
			return err
		}
	}
	if err := screenshot(chromeBin, dir, pagePath, o.out, o.width, height); err != nil {
		return err
	}
	st, err := os.Stat(o.out)
	if err != nil {
		return err
	}
	logf("wrote %s (%dx%d, %d KB)", o.out, o.width, height, st.Size()/1024)
	return nil
}

// waitTargetsUp waits up to 30s until Prometheus has scraped all n targets successfully.
func waitTargetsUp(ctx context.Context, ps *promServer, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		up, err := ps.upTargets(ctx)
		if err == nil && up == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Prometheus scrapes %d of %d targets up after 30s (last error: %v)", up, n, err)
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for the scrape targets: %w", err)
		}
	}
}
