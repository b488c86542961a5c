package prometheus_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/observe"
)

// The shipped dashboard and alerting rules, from this module's directory.
var (
	dashboardFile = filepath.Join("..", "..", "dashboards", "watchtree.json")
	alertsFile    = filepath.Join("..", "..", "dashboards", "alerts.yml")
)

// registeredFamilies returns every metric family a Metrics registers, by name, with its type.
// It exercises the collector so that every family has a series (a leader and an all-instances
// stream, a lease, a dead-letter count, an oplog window, a checkpoint, a handler call), and
// fails unless the families gathered are exactly as many as the collector describes: a family
// left out of the exercise would otherwise pass for unregistered.
func registeredFamilies(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	now := time.Now()
	src := &fakeSource{
		sts: []watchtree.StreamStatus{
			{Name: "pay", State: watchtree.StateRunning, ReadThrough: now.Add(-time.Second),
				Checkpoint: token(uint32(now.Unix()), 1), CheckpointAt: now.Add(-time.Second)},
			{Name: "bill", Mode: watchtree.SingleLeader.String(), State: watchtree.StateRunning, ReadThrough: now,
				Lease: &watchtree.LeaseStatus{Role: watchtree.RoleLeader, Epoch: 1}},
		},
		rd: watchtree.ServerReadings{
			DeadLetters: map[string]watchtree.DeadLetterCount{"pay": {N: 2}, "bill": {N: 0}},
			Oplog:       watchtree.OplogReading{Oldest: now.Add(-24 * time.Hour), Newest: now},
		},
	}
	m, reg := attached(t, src)
	m.ObserveHandler("pay", time.Millisecond, nil)
	m.OnEvent(observe.CursorChanged{Meta: observe.Meta{Stream: "pay"}, Attached: true})

	descs := make(chan *prom.Desc, 100)
	m.Describe(descs)
	close(descs)
	described := len(descs)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dto.MetricType{}
	for _, f := range fams {
		out[f.GetName()] = f.GetType()
	}
	if len(out) != described {
		t.Fatalf("the exercise gathered %d metric families, the collector describes %d: give every family a series here", len(out), described)
	}
	return out
}

// unregistered returns the metric names of names that fams does not register: a histogram's
// (or summary's) _bucket, _sum and _count series count as the family's.
func unregistered(names []string, fams map[string]dto.MetricType) []string {
	var bad []string
	for _, n := range names {
		if _, ok := fams[n]; ok {
			continue
		}
		found := false
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			base, ok := strings.CutSuffix(n, suf)
			if !ok {
				continue
			}
			switch fams[base] {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				found = true
			case dto.MetricType_SUMMARY:
				found = suf != "_bucket"
			}
		}
		if !found {
			bad = append(bad, n)
		}
	}
	return bad
}

// promqlFunctions are PromQL's functions (Prometheus 2.x and 3.x); an identifier followed by
// "(" that is none of these nor a grouping keyword is reported, not taken for a function.
var promqlFunctions = set(`abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time
	ceil changes clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week
	day_of_year days_in_month deg delta deriv double_exponential_smoothing exp floor
	histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev
	histogram_stdvar histogram_sum holt_winters hour idelta increase info irate label_join
	label_replace last_over_time ln log10 log2 mad_over_time max_over_time min_over_time minute
	month pi predict_linear present_over_time quantile_over_time rad rate resets round scalar
	sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time
	stdvar_over_time sum_over_time tan tanh time timestamp vector year`)

// promqlKeywords are aggregation operators, binary operators and modifiers: never metric names.
var promqlKeywords = set(`sum min max avg group stddev stdvar count count_values bottomk topk
	quantile limitk limit_ratio and or unless bool offset start end inf nan atan2`)

// labelLists are the keywords followed by a parenthesized list of label names.
var labelLists = set(`by without on ignoring group_left group_right`)

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// metricNames returns the metric names a PromQL expression selects, in order of first use. It
// drops string literals, label matchers ({...}), ranges and subqueries ([...]), Grafana
// variables ($x, ${x}), numbers and durations, and the label lists of by, without, on,
// ignoring, group_left and group_right; of the identifiers left, one followed by "(" must be
// a PromQL function (else an error), a keyword is skipped, and every other is a metric name.
func metricNames(expr string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	s := expr
	i := 0
	next := func(j int) byte { // the first byte at or after j that is not a space
		for j < len(s) && strings.ContainsRune(" \t\r\n", rune(s[j])) {
			j++
		}
		if j < len(s) {
			return s[j]
		}
		return 0
	}
	skipTo := func(j int, open, close byte) (int, error) { // j at open; returns the index after its close
		depth := 0
		for k := j; k < len(s); k++ {
			switch c := s[k]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(s, k)
				if err != nil {
					return 0, err
				}
				k = end - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return k + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unclosed %q at offset %d of %q", open, j, expr)
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '#': // a comment, to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '{':
			end, err := skipTo(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := skipTo(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$': // a Grafana variable: $name or ${name}
			i++
			if i < len(s) && s[i] == '{' {
				end, err := skipTo(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.': // a number or a duration: 0.5, 1e3, 10m, 0x1f
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			i = j
			switch {
			case labelLists[word]:
				if next(i) == '(' {
					k := strings.IndexByte(s[i:], '(') + i
					end, err := skipTo(k, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				}
			case promqlKeywords[word]:
			case next(i) == '(':
				if !promqlFunctions[word] {
					return nil, fmt.Errorf("%q is followed by ( but is not a PromQL function, in %q", word, expr)
				}
			default:
				if !seen[word] {
					seen[word] = true
					names = append(names, word)
				}
			}
		default:
			i++
		}
	}
	return names, nil
}

// skipString returns the index after the string literal that starts at s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for k := i + 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			if q != '`' {
				k++
			}
		case q:
			return k + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string literal at offset %d of %q", i, s)
}

// TestMetricNamesTokenizer pins the tokenizer on the cases the shipped files use and on a few
// they do not (a comment, a subquery, strings with braces, an unknown function).
func TestMetricNamesTokenizer(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`watchtree_stream_lag_seconds`, []string{"watchtree_stream_lag_seconds"}},
		{`max by (stream) (watchtree_stream_lag_seconds{stream=~"$stream"}) > 300`, []string{"watchtree_stream_lag_seconds"}},
		{`histogram_quantile(0.99, sum by (stream, le) (rate(watchtree_handler_duration_seconds_bucket{stream=~"$stream"}[$__rate_interval])))`,
			[]string{"watchtree_handler_duration_seconds_bucket"}},
		{`(count by (stream) (a == 1)) unless on (stream) (count by(stream)(b{role="leader"}))`, []string{"a", "b"}},
		{"sum(rate(x_total[5m] offset 1h)) by (outcome) / ignoring(outcome) group_left(stream) y # z_total\n or vector(0)", []string{"x_total", "y"}},
		{`max_over_time(deriv(lag[10m])[1h:5m]) and label_replace(up, "dst", "$1{", "src", "(.*)")`, []string{"lag", "up"}},
		{`{__name__="x"} + 1e3 + 0x1F + inf`, nil},
	} {
		got, err := metricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`rat(x[5m])`, `sum(x{a="b"`, `x{a="}`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) = %q, want an error", bad, got)
		}
	}
	fams := map[string]dto.MetricType{"h_seconds": dto.MetricType_HISTOGRAM, "c_total": dto.MetricType_COUNTER}
	got := unregistered([]string{"h_seconds_bucket", "h_seconds_count", "h_seconds", "c_total", "c_total_count", "nope"}, fams)
	if !slices.Equal(got, []string{"c_total_count", "nope"}) {
		t.Errorf("unregistered = %q, want c_total_count (not a histogram) and nope", got)
	}
}

// grafanaDashboard is the part of Grafana's dashboard JSON model the test reads.
type grafanaDashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *grafanaDS      `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int        `json:"id"`
	Title      string     `json:"title"`
	Type       string     `json:"type"`
	Datasource *grafanaDS `json:"datasource"`
	Targets    []struct {
		Expr       string     `json:"expr"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a row's collapsed panels
}

// ruleFile is Prometheus's rule file format, as promtool reads it.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestDashboardAndAlertsUseRegisteredMetrics: every metric name in the PromQL of
// dashboards/watchtree.json and dashboards/alerts.yml is one the collector registers, so that
// neither can reference a metric that does not exist (a rename fails here, naming the metric
// and where it is used). It also checks the dashboard's variables and panels, the rules'
// structure, that the panels and alerts the README promises are there, and runs
// `promtool check rules` and `promtool test rules` when promtool is installed.
func TestDashboardAndAlertsUseRegisteredMetrics(t *testing.T) {
	fams := registeredFamilies(t)
	used := map[string]bool{} // every name used, by either file
	check := func(t *testing.T, where, expr string) {
		t.Helper()
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: empty expression", where)
			return
		}
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, n := range names {
			used[n] = true
		}
		for _, n := range unregistered(names, fams) {
			t.Errorf("%s: metric %q is not registered by metrics/prometheus (expression %q)", where, n, expr)
		}
	}

	t.Run("dashboard", func(t *testing.T) {
		raw, err := os.ReadFile(dashboardFile)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", dashboardFile, err)
		}
		if d.Title == "" || d.UID == "" {
			t.Errorf("dashboard title %q, uid %q: both are needed for an import", d.Title, d.UID)
		}
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
			if v.Name == "datasource" && (v.Type != "datasource" || string(v.Query) != `"prometheus"`) {
				t.Errorf("variable datasource: type %q, query %s; want a Prometheus datasource variable", v.Type, v.Query)
			}
			if v.Name == "stream" {
				var q struct {
					Query string `json:"query"`
				}
				if err := json.Unmarshal(v.Query, &q); err != nil {
					t.Fatalf("variable stream: query %s: %v", v.Query, err)
				}
				m := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*stream\s*\)$`).FindStringSubmatch(q.Query)
				if m == nil {
					t.Errorf("variable stream: query %q, want label_values(<metric>, stream)", q.Query)
				} else {
					check(t, "variable stream", m[1])
				}
				if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
					t.Errorf("variable stream: datasource %+v, want uid ${datasource}", v.Datasource)
				}
			}
		}
		if vars["datasource"] != "datasource" || vars["stream"] != "query" {
			t.Errorf("variables %v: want datasource (datasource) and stream (query)", vars)
		}
		panels := d.Panels
		for i := 0; i < len(panels); i++ {
			panels = append(panels, panels[i].Panels...)
		}
		ids := map[int]bool{}
		for _, p := range panels {
			if p.Type == "row" {
				continue
			}
			where := fmt.Sprintf("dashboard panel %q", p.Title)
			if ids[p.ID] {
				t.Errorf("%s: panel id %d used twice", where, p.ID)
			}
			ids[p.ID] = true
			if len(p.Targets) == 0 {
				t.Errorf("%s: no query", where)
			}
			for _, tg := range p.Targets {
				ds := tg.Datasource
				if ds == nil {
					ds = p.Datasource
				}
				if ds == nil || ds.UID != "${datasource}" {
					t.Errorf("%s: datasource %+v, want uid ${datasource} (the variable)", where, ds)
				}
				check(t, where, tg.Expr)
			}
		}
	})
	dashboardUses := maps.Clone(used)

	t.Run("alerts", func(t *testing.T) {
		raw, err := os.ReadFile(alertsFile)
		if err != nil {
			t.Fatal(err)
		}
		var rf ruleFile
		dec := yaml.NewDecoder(strings.NewReader(string(raw)))
		dec.KnownFields(true) // a misspelt key (fro:, annotation:) is an error, not a silent default
		if err := dec.Decode(&rf); err != nil {
			t.Fatalf("%s: %v", alertsFile, err)
		}
		if len(rf.Groups) == 0 {
			t.Fatalf("%s: no groups", alertsFile)
		}
		alerts := map[string]bool{}
		for _, g := range rf.Groups {
			if g.Name == "" || len(g.Rules) == 0 {
				t.Errorf("group %q: a group needs a name and rules", g.Name)
			}
			for _, r := range g.Rules {
				where := fmt.Sprintf("alert %q", r.Alert)
				if r.Alert == "" {
					t.Errorf("group %q: a rule without alert: (record %q): this file holds alerting rules", g.Name, r.Record)
					continue
				}
				if alerts[r.Alert] {
					t.Errorf("%s: defined twice", where)
				}
				alerts[r.Alert] = true
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("%s: severity %q, want critical or warning", where, s)
				}
				for _, a := range []string{"summary", "description"} {
					if !strings.Contains(r.Annotations[a], "$labels.stream") {
						t.Errorf("%s: annotation %s %q does not name the stream ({{ $labels.stream }})", where, a, r.Annotations[a])
					}
				}
				check(t, where, r.Expr)
			}
		}
		for _, want := range []string{"WatchtreeStreamStalled", "WatchtreeStreamLagHigh", "WatchtreeHeadroomLow",
			"WatchtreeStreamCrashed", "WatchtreeDeadLettersRising", "WatchtreeNoLeader"} {
			if !alerts[want] {
				t.Errorf("alert %s is missing", want)
			}
		}
	})

	// The panels the README promises: each needs its metric in the dashboard.
	for _, want := range []string{"watchtree_stream_state", "watchtree_events_total", "watchtree_stream_lag_seconds",
		"watchtree_token_headroom_seconds", "watchtree_dead_letters_total", "watchtree_restarts_total",
		"watchtree_stream_role", "watchtree_cursor_changes_total", "watchtree_handler_duration_seconds_bucket"} {
		if !dashboardUses[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}

	t.Run("promtool", func(t *testing.T) {
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("promtool is not installed (Debian: apt-get install prometheus): `promtool check rules` and `promtool test rules` not run; the parse checks above ran")
		}
		for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", filepath.Join("..", "..", "dashboards", "alerts_test.yml")}} {
			out, err := exec.Command(promtool, args...).CombinedOutput()
			if err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
}
