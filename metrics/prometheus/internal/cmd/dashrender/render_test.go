package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLayoutFollowsGridPos: panels land where Grafana's 24-column grid puts them (30px rows,
// 8px apart), and the page is as high as the lowest panel.
func TestLayoutFollowsGridPos(t *testing.T) {
	ps := []panel{{GridPos: gridPos{X: 0, Y: 0, W: 8, H: 8}}, {GridPos: gridPos{X: 8, Y: 0, W: 16, H: 8}},
		{GridPos: gridPos{X: 0, Y: 8, W: 24, H: 4}}}
	boxes, height := layout(ps, 1600)
	want := []rect{{16, 64, 517, 296}, {541, 64, 1043, 296}, {16, 368, 1568, 144}}
	for i := range want {
		if boxes[i] != want[i] {
			t.Errorf("panel %d at %+v, want %+v", i, boxes[i], want[i])
		}
	}
	if height != 368+144+16 {
		t.Errorf("page height %d, want %d", height, 368+144+16)
	}
}

// TestShippedDashboardRenders: every panel of dashboards/watchtree.json sits inside the page
// without overlapping another, every target's variables expand, and a page with no data still
// names every panel.
func TestShippedDashboardRenders(t *testing.T) {
	d, err := loadDashboard(filepath.Join("..", "..", "..", "..", "..", "dashboards", "watchtree.json"))
	if err != nil {
		t.Fatal(err)
	}
	boxes, height := layout(d.Panels, 1600)
	for i, a := range boxes {
		if a.X < 0 || a.X+a.W > 1600 || a.Y+a.H > height {
			t.Errorf("panel %q at %+v is off the %dx%d page", d.Panels[i].Title, a, 1600, height)
		}
		for j := i + 1; j < len(boxes); j++ {
			b := boxes[j]
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("panels %q and %q overlap", d.Panels[i].Title, d.Panels[j].Title)
			}
		}
		for _, tg := range d.Panels[i].Targets {
			if _, err := d.expand(tg.Expr, interval{Step: time.Second, Scrape: time.Second, Range: time.Minute}); err != nil {
				t.Error(err)
			}
		}
	}
	pg := page{Title: d.Title, From: time.Unix(0, 0), To: time.Unix(60, 0), Step: time.Second, Panels: d.Panels,
		Data: make([]panelData, len(d.Panels)), Width: 1600}
	out, _ := renderHTML(pg)
	for _, p := range d.Panels {
		if !strings.Contains(out, ">"+htmlText(p.Title)+"<") {
			t.Errorf("the page does not name panel %q", p.Title)
		}
	}
}

func htmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestExpandVariables: query variables take their All value, interval variables whole
// seconds ($__rate_interval as Grafana computes it), and an unknown variable is an error
// naming it.
func TestExpandVariables(t *testing.T) {
	d := &dashboard{}
	d.Templating.List = []variable{{Name: "datasource", Type: "datasource"}, {Name: "stream", Type: "query", IncludeAll: true, AllValue: ".*"},
		{Name: "node", Type: "query", IncludeAll: true}}
	iv := interval{Step: 2 * time.Second, Scrape: time.Second, Range: 150 * time.Second}
	got, err := d.expand(`rate(x{stream=~"$stream",node=~"${node}"}[$__rate_interval]) + increase(y[$__range]) / $__interval`, iv)
	if err != nil {
		t.Fatal(err)
	}
	if want := `rate(x{stream=~".*",node=~".*"}[4s]) + increase(y[150s]) / 2s`; got != want {
		t.Errorf("expanded to\n%s\nwant\n%s", got, want)
	}
	iv.Step = 10 * time.Second
	if got, _ := d.expand("[$__rate_interval]", iv); got != "[11s]" {
		t.Errorf("rate interval with a 10s step and 1s scrape = %s, want [11s] (step + scrape)", got)
	}
	if _, err := d.expand(`x{a="$nope"}`, iv); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("an unknown variable gave %v, want an error naming it", err)
	}
}

// fixedQuerier answers by expression from fixed API replies, and records how it was asked.
type fixedQuerier struct {
	replies map[string]string // expanded expression -> the API's data object
	instant []string
	ranged  []string
}

func (q *fixedQuerier) reply(expr string) ([]series, error) {
	return decodeResult(json.RawMessage(q.replies[expr]))
}

func (q *fixedQuerier) queryRange(_ context.Context, expr string, _, _ time.Time, _ time.Duration) ([]series, error) {
	q.ranged = append(q.ranged, expr)
	return q.reply(expr)
}

func (q *fixedQuerier) query(_ context.Context, expr string, _ time.Time) ([]series, error) {
	q.instant = append(q.instant, expr)
	return q.reply(expr)
}

// TestQueryToSVG: a fixed query_range reply becomes named series (legendFormat), and the
// chart draws one polyline per run of samples, broken at a NaN and at a missing scrape, with
// 0 at the bottom and the largest value at the top; the stat panel shows the last number and
// the table one row per series of its instant query.
func TestQueryToSVG(t *testing.T) {
	d := &dashboard{}
	d.Templating.List = []variable{{Name: "stream", Type: "query", IncludeAll: true, AllValue: ".*"}}
	d.Panels = []panel{
		{Title: "Lag", Type: "timeseries", Targets: []target{{RefID: "A", Expr: `lag{stream=~"$stream"}`, LegendFormat: "{{stream}} lag"}}},
		{Title: "Up", Type: "stat", Targets: []target{{RefID: "A", Expr: `up`}}},
		{Title: "State", Type: "table", Targets: []target{{RefID: "A", Expr: `state == 1`, Instant: true}}},
	}
	d.Panels[0].FieldConfig.Defaults.Unit = "s"
	q := &fixedQuerier{replies: map[string]string{
		// b sorts after a whatever the reply's order; b misses the scrape at 103 and has a NaN at 106.
		`lag{stream=~".*"}`: `{"resultType":"matrix","result":[
			{"metric":{"stream":"b"},"values":[[100,"1"],[101,"2"],[102,"3"],[104,"4"],[105,"5"],[106,"NaN"],[107,"6"]]},
			{"metric":{"stream":"a"},"values":[[100,"0"],[101,"10"],[102,"5"]]}]}`,
		`up`:         `{"resultType":"matrix","result":[{"metric":{},"values":[[100,"1"],[101,"0.5"],[102,"NaN"]]}]}`,
		`state == 1`: `{"resultType":"vector","result":[{"metric":{"stream":"b","state":"standby"},"value":[107,"1"]},{"metric":{"stream":"a","state":"running"},"value":[107,"1"]}]}`,
	}}
	from, to := time.Unix(100, 0), time.Unix(107, 0)
	data, err := evaluate(context.Background(), q, d, from, to, interval{Step: time.Second, Scrape: time.Second, Range: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.instant) != 1 || q.instant[0] != "state == 1" || len(q.ranged) != 2 {
		t.Errorf("instant queries %q, range queries %q: want the table's target instant, the others ranged", q.instant, q.ranged)
	}
	lag := data[0].Series
	if len(lag) != 2 || lag[0].Name != "a lag" || lag[1].Name != "b lag" {
		t.Fatalf("series %+v, want \"a lag\" then \"b lag\"", lag)
	}

	svg := chartSVG(lag, 400, 124, "s", from, to, time.Second, nil)
	var lines [][][2]float64
	for _, m := range regexp.MustCompile(`<polyline[^>]* points="([^"]*)"`).FindAllStringSubmatch(svg, -1) {
		var pts [][2]float64
		for _, xy := range strings.Fields(m[1]) {
			x, y, _ := strings.Cut(xy, ",")
			fx, _ := strconv.ParseFloat(x, 64)
			fy, _ := strconv.ParseFloat(y, 64)
			pts = append(pts, [2]float64{fx, fy})
		}
		lines = append(lines, pts)
	}
	// a: one run of 3; b: 100-102, then 104-105 (103 missing), then 107 alone (a circle).
	if len(lines) != 3 || len(lines[0]) != 3 || len(lines[1]) != 3 || len(lines[2]) != 2 {
		t.Fatalf("polylines %v: want runs of 3 (a), 3 and 2 (b)", lines)
	}
	if n := strings.Count(svg, "<circle"); n != 1 {
		t.Errorf("%d single-sample circles, want 1 (b at 107, after the NaN)", n)
	}
	plotBottom, plotRight := float64(124-axisBottom), float64(400-axisRight)
	if p := lines[0][0]; p != [2]float64{axisLeft, plotBottom} {
		t.Errorf("a's first sample (t=100, 0) at %v, want the plot's bottom left %v", p, [2]float64{axisLeft, plotBottom})
	}
	if p := lines[0][1]; p[1] != axisTop {
		t.Errorf("a's 10 (the largest value, a round tick) at y=%v, want the plot's top %d", p[1], axisTop)
	}
	if p := lines[2][1]; p[0] != plotRight-float64(plotRight-axisLeft)*2/7 {
		t.Errorf("b's sample at t=105 at x=%v, want 5/7 of the way", p[0])
	}
	for _, label := range []string{">0 s<", ">10 s<", ">5 s<"} {
		if !strings.Contains(svg, label) {
			t.Errorf("the y axis lacks the tick %s", label)
		}
	}

	body := panelBody(d.Panels[1], data[1], rect{W: 300, H: 200}, from, to, time.Second)
	if !strings.Contains(body, ">0.5<") {
		t.Errorf("stat body %s: want the last number, 0.5 (the NaN after it skipped)", body)
	}
	table := panelBody(d.Panels[2], data[2], rect{W: 300, H: 200}, from, to, time.Second)
	if want := "<tr><th>state</th><th>stream</th></tr><tr><td>running</td><td>a</td></tr><tr><td>standby</td><td>b</td></tr>"; !strings.Contains(table, want) {
		t.Errorf("table %s\nwant the rows %s", table, want)
	}
}

// TestAxisStep: ticks in seconds become whole minutes and hours once they are that long.
func TestAxisStep(t *testing.T) {
	for _, c := range []struct {
		raw  float64
		unit string
		want float64
	}{{0.3, "s", 0.5}, {12, "s", 20}, {25, "s", 30}, {37.5, "s", 60}, {50, "s", 60}, {100, "s", 120}, {250, "s", 300}, {5000, "s", 7200}, {50, "", 50}, {100, "", 100}} {
		if got := axisStep(c.raw, c.unit); got != c.want {
			t.Errorf("axisStep(%v, %q) = %v, want %v", c.raw, c.unit, got, c.want)
		}
	}
}

// TestFormatValue: Grafana's units as the axes and stat panels spell them.
func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0, "s", "0 s"}, {0.25, "s", "250 ms"}, {1.5, "s", "1.5 s"}, {90, "s", "1.5 min"}, {7200, "s", "2 hour"},
		{3.14159, "ops", "3.14 ops/s"}, {12345, "", "12.3 K"}, {2.5e6, "", "2.5 Mil"}, {-0.0001, "", "0"}, {42, "", "42"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

// TestMissingToolNamesThePackage: a missing executable fails naming the apt package.
func TestMissingToolNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tl := range []tool{prometheusTool, chromiumTool} {
		_, err := tl.find()
		if err == nil || !strings.Contains(err.Error(), "apt-get install -y "+tl.Package) {
			t.Errorf("%s missing: %v, want an error naming the package %s", tl.Names[0], err, tl.Package)
		}
	}
}
