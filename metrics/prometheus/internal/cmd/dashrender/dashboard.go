package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// dashboard is the part of a Grafana dashboard JSON model the renderer draws: its title,
// template variables and panels. Fields the renderer does not use are left out.
type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// variable is a dashboard template variable. Only query variables take part in PromQL; the
// renderer always selects All, as a freshly imported dashboard does.
type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
}

// panel is one Grafana panel: its type (timeseries, stat, table), place on the 24-column grid,
// PromQL targets and display unit.
type panel struct {
	ID          int      `json:"id"`
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Description string   `json:"description"`
	GridPos     gridPos  `json:"gridPos"`
	Targets     []target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds struct {
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
			Custom struct {
				ThresholdsStyle struct {
					Mode string `json:"mode"`
				} `json:"thresholdsStyle"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// gridPos is a panel's place in Grafana's grid: 24 columns wide, rows of one height unit.
type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// target is one PromQL query of a panel; Instant asks for the value at the range's end only.
type target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Instant      bool   `json:"instant"`
}

// loadDashboard reads and decodes a dashboard file, failing on a panel without targets or
// with a target without an expression, which the renderer could only draw empty.
func loadDashboard(path string) (*dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Panels) == 0 {
		return nil, fmt.Errorf("%s: no panels", path)
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no targets", path, p.Title)
		}
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) == "" {
				return nil, fmt.Errorf("%s: panel %q target %s has no expr", path, p.Title, t.RefID)
			}
		}
	}
	return &d, nil
}

// interval holds the values of Grafana's built-in interval variables for one render.
type interval struct {
	Step   time.Duration // $__interval: the query_range step
	Scrape time.Duration // the Prometheus scrape interval, for $__rate_interval
	Range  time.Duration // $__range: the whole time range
}

// rateInterval is Grafana's $__rate_interval: max($__interval + scrape interval, 4 × scrape
// interval), so that a rate() window always holds at least four samples.
func (iv interval) rateInterval() time.Duration {
	return max(iv.Step+iv.Scrape, 4*iv.Scrape)
}

// varRef matches $name and ${name} (Grafana's simple and braced variable syntaxes).
var varRef = regexp.MustCompile(`\$\{?(__[a-z_]+|[A-Za-z][A-Za-z0-9_]*)\}?`)

// expand substitutes the dashboard's variables in expr: query variables with their All value
// (allValue, else ".*" for the regex matchers they are used in) and the interval variables
// as Prometheus durations in whole seconds. An unknown variable is an error naming it.
func (d *dashboard) expand(expr string, iv interval) (string, error) {
	vals := map[string]string{
		"__interval":      promDuration(iv.Step),
		"__rate_interval": promDuration(iv.rateInterval()),
		"__range":         promDuration(iv.Range),
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		all := v.AllValue
		if all == "" {
			all = ".*"
		}
		vals[v.Name] = all
	}
	var bad []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		name := varRef.FindStringSubmatch(m)[1]
		if v, ok := vals[name]; ok {
			return v
		}
		bad = append(bad, name)
		return m
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("expression %q uses unknown variable(s) %s", expr, strings.Join(bad, ", "))
	}
	return out, nil
}

// promDuration spells d in whole seconds (at least 1s), as PromQL range selectors take it.
func promDuration(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprintf("%ds", max(s, 1))
}

// legendRef matches {{label}} in a legendFormat.
var legendRef = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// legend names a series as Grafana does: the target's legendFormat with {{label}} replaced by
// the series' label value, or with no format the series' labels in PromQL notation.
func legend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		return labelString(labels)
	}
	return legendRef.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendRef.FindStringSubmatch(m)[1]]
	})
}
