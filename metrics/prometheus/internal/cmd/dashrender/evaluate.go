package main

import (
	"context"
	"fmt"
	"time"
)

// querier runs PromQL; promServer is the real one, tests use fixed results.
type querier interface {
	queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error)
	query(ctx context.Context, expr string, at time.Time) ([]series, error)
}

// evaluate runs every panel's own targets over [from, to] as Grafana would: the dashboard's
// variables expanded (All selected), an instant target at to, the others with query_range at
// iv.Step. A target that fails leaves its error in the panel, so that the page shows it
// rather than an empty chart; the returned error is for a variable the dashboard lacks.
func evaluate(ctx context.Context, q querier, d *dashboard, from, to time.Time, iv interval) ([]panelData, error) {
	out := make([]panelData, len(d.Panels))
	for i, p := range d.Panels {
		for _, t := range p.Targets {
			expr, err := d.expand(t.Expr, iv)
			if err != nil {
				return nil, fmt.Errorf("panel %q target %s: %w", p.Title, t.RefID, err)
			}
			var ss []series
			if t.Instant {
				ss, err = q.query(ctx, expr, to)
			} else {
				ss, err = q.queryRange(ctx, expr, from, to, iv.Step)
			}
			if err != nil {
				out[i].Err = fmt.Sprintf("%s: %v", t.RefID, err)
				break
			}
			for _, s := range ss {
				if p.Type == "table" {
					out[i].Rows = append(out[i].Rows, s.Labels)
					continue
				}
				out[i].Series = append(out[i].Series, named{Name: legend(t.LegendFormat, s.Labels), Points: s.Points})
			}
		}
	}
	return out, nil
}
