// Package health serves a watchtree runtime's HTTP endpoints for orchestrators and scrapers,
// through one opt-in handler:
//
//	GET /healthz  200 while the process serves HTTP (liveness)
//	GET /readyz   200 when every stream is running or standby, else 503 naming the streams
//	              that are not (starting, backoff, stopping, stopped, crashed)
//	GET /metrics  the Options.Metrics handler (e.g. promhttp.HandlerFor on a registry holding
//	              the metrics/prometheus adapter), 404 when none is set
//
// A standby (a SingleLeader stream another instance leads) is ready: it is doing its job.
// A crashed or given-up stream is not, nor is one in backoff or still starting.
//
//	mux.Handle("/", health.Handler(rt, health.Options{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}))
//
// It may be mounted under a prefix as well (mux.Handle("/ops/", ...) serves /ops/healthz): it
// routes by the path's last segment.
package health

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/watchtree/watchtree"
)

// Source is what /readyz reads; *watchtree.Runtime is one.
type Source interface {
	// Streams returns the status of every stream; an error makes /readyz answer 503 with it.
	Streams(ctx context.Context) ([]watchtree.StreamStatus, error)
}

// Options configure Handler. The zero value means no /metrics and a 2s readiness bound.
type Options struct {
	// Metrics serves /metrics when set.
	Metrics http.Handler
	// Timeout bounds the status reads of one /readyz. Default 2s; a supervisor that does not
	// answer in time makes the instance not ready.
	Timeout time.Duration
}

// Handler returns the handler of /healthz, /readyz and /metrics. It routes by the last
// segment of the request path, so it serves the same endpoints mounted at the root
// (mux.Handle("/", h)) or under a prefix, with or without http.StripPrefix
// (mux.Handle("/ops/", h) answers /ops/healthz, /ops/readyz and /ops/metrics). Any other path
// is 404; a method other than GET and HEAD is 405.
func Handler(src Source, o Options) http.Handler {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var serve func()
		switch path.Base(r.URL.Path) {
		case "healthz":
			serve = func() {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				fmt.Fprintln(w, "ok")
			}
		case "readyz":
			serve = func() {
				ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
				defer cancel()
				ready, report := Ready(ctx, src)
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				if !ready {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				fmt.Fprint(w, report)
			}
		case "metrics":
			if o.Metrics != nil {
				serve = func() { o.Metrics.ServeHTTP(w, r) }
			}
		}
		switch {
		case serve == nil:
			http.NotFound(w, r)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		default:
			serve()
		}
	})
}

// Ready reports whether every stream of src is running or standby, with a text report: "ready"
// or "not ready" on the first line, then one line per stream ("orders: crashed: <why>"). A
// stream still copying its collection (snapshotting) is not ready yet: what it feeds is still
// being filled.
func Ready(ctx context.Context, src Source) (bool, string) {
	sts, err := src.Streams(ctx)
	var b strings.Builder
	ready := err == nil
	for _, st := range sts {
		if st.State != watchtree.StateRunning && st.State != watchtree.StateStandby {
			ready = false
		}
	}
	if ready {
		b.WriteString("ready\n")
	} else {
		b.WriteString("not ready\n")
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	for _, st := range sts {
		line := fmt.Sprintf("%s: %s", st.Name, st.State)
		if st.State != watchtree.StateRunning && st.State != watchtree.StateStandby && st.Why != "" {
			line += ": " + strings.Join(strings.Fields(st.Why), " ")
		}
		b.WriteString(line + "\n")
	}
	return ready, b.String()
}
