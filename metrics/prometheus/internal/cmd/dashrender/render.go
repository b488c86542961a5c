package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"
)

// Grafana's grid geometry, in CSS pixels: a row unit is 30px high, panels are 8px apart, and
// the 24 columns share the page's width.
const (
	gridColumns  = 24
	cellHeight   = 30
	gridMargin   = 8
	pagePad      = 16
	pageHeader   = 64 // the dashboard's title and time range above the grid
	panelTitle   = 30 // a panel's title bar
	panelPad     = 8
	legendLine   = 16 // one row of legend items
	legendCharPx = 6.3
)

// palette is Grafana's classic series palette, used in series order within a panel.
var palette = []string{"#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9",
	"#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477"}

// rect is a panel's box on the page, in CSS pixels.
type rect struct{ X, Y, W, H int }

// layout places panels as Grafana's grid does on a page pageWidth pixels wide, and returns
// each panel's box (in the order of ps) and the page height that holds them all.
func layout(ps []panel, pageWidth int) ([]rect, int) {
	colW := float64(pageWidth-2*pagePad-(gridColumns-1)*gridMargin) / gridColumns
	out := make([]rect, len(ps))
	bottom := 0
	for i, p := range ps {
		g := p.GridPos
		r := rect{
			X: pagePad + int(math.Round(float64(g.X)*(colW+gridMargin))),
			Y: pageHeader + g.Y*(cellHeight+gridMargin),
			W: int(math.Round(float64(g.W)*colW + float64(g.W-1)*gridMargin)),
			H: g.H*cellHeight + (g.H-1)*gridMargin,
		}
		out[i] = r
		bottom = max(bottom, r.Y+r.H)
	}
	return out, bottom + pagePad
}

// panelData is what a panel's queries returned, ready to draw.
type panelData struct {
	Series []named             // timeseries and stat panels
	Rows   []map[string]string // table panels: one row of labels per series
	Err    string              // a query that failed: drawn in the panel instead of data
}

// page is everything one render draws.
type page struct {
	Title    string
	From, To time.Time
	Step     time.Duration
	Source   string // how the data was produced, shown under the title
	Panels   []panel
	Data     []panelData // by panel index
	Width    int
}

// renderHTML draws the dashboard as one self-contained HTML page (inline CSS and SVG, no
// scripts or fonts to fetch), sized to the grid; it returns the page and its height.
func renderHTML(pg page) (string, int) {
	boxes, height := layout(pg.Panels, pg.Width)
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>
body{margin:0;background:#111217;color:#ccccdc;font:12px/1.3 "DejaVu Sans",Inter,Helvetica,Arial,sans-serif;width:%dpx;height:%dpx;position:relative;overflow:hidden}
.hdr{position:absolute;left:%dpx;top:10px;right:%dpx}
.hdr h1{margin:0;font-size:19px;font-weight:500;color:#d8d9da}
.hdr .sub{margin-top:5px;color:#8e8e9c;font-size:12px}
.p{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px;box-sizing:border-box;overflow:hidden}
.p .t{height:%dpx;line-height:%dpx;padding:0 %dpx;font-size:13px;font-weight:500;color:#d8d9da;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.lg{position:absolute;left:%dpx;right:%dpx;overflow:hidden;font-size:11px}
.lg span{display:inline-block;margin-right:14px;white-space:nowrap;height:%dpx}
.lg i{display:inline-block;width:14px;height:3px;margin:0 5px 3px 0;vertical-align:middle;border-radius:1px}
.stat{position:absolute;left:0;right:0;display:flex;flex-direction:column;align-items:center;justify-content:center}
.stat b{font-size:44px;font-weight:500}
.stat em{font-style:normal;color:#8e8e9c;font-size:12px}
.nd{position:absolute;left:0;right:0;text-align:center;color:#8e8e9c}
table{border-collapse:collapse;margin:0 %dpx;width:calc(100%% - %dpx);font-size:12px}
th{text-align:left;color:#6e9fff;font-weight:500;border-bottom:1px solid #2c3235;padding:4px 6px}
td{border-bottom:1px solid #22252b;padding:4px 6px}
</style></head><body>
`, html.EscapeString(pg.Title), pg.Width, height, pagePad, pagePad, panelTitle, panelTitle, panelPad,
		panelPad, panelPad, legendLine, panelPad, 2*panelPad)
	fmt.Fprintf(&b, `<div class="hdr"><h1>%s</h1><div class="sub">%s – %s UTC · %s</div></div>`+"\n",
		html.EscapeString(pg.Title), pg.From.UTC().Format("2006-01-02 15:04:05"), pg.To.UTC().Format("15:04:05"),
		html.EscapeString(pg.Source))
	for i, p := range pg.Panels {
		r := boxes[i]
		fmt.Fprintf(&b, `<div class="p" style="left:%dpx;top:%dpx;width:%dpx;height:%dpx"><div class="t">%s</div>`,
			r.X, r.Y, r.W, r.H, html.EscapeString(p.Title))
		b.WriteString(panelBody(p, pg.Data[i], r, pg.From, pg.To, pg.Step))
		b.WriteString("</div>\n")
	}
	b.WriteString("</body></html>\n")
	return b.String(), height
}

// panelBody draws the inside of one panel below its title.
func panelBody(p panel, d panelData, r rect, from, to time.Time, step time.Duration) string {
	bodyH := r.H - panelTitle - 2
	if d.Err != "" {
		return fmt.Sprintf(`<div class="nd" style="top:%dpx;color:#F2495C;padding:0 8px">query failed: %s</div>`,
			panelTitle+bodyH/3, html.EscapeString(d.Err))
	}
	switch p.Type {
	case "table":
		return tableHTML(d.Rows)
	case "stat":
		return statHTML(d.Series, p.FieldConfig.Defaults.Unit, bodyH)
	default:
		return timeseriesHTML(p, d.Series, r.W-2*panelPad-2, bodyH, from, to, step)
	}
}

// tableHTML draws one row per series with a column per label, the columns in the order the
// labels first appear (the dashboard's labelsToFields transformation, Time and Value hidden).
func tableHTML(rows []map[string]string) string {
	if len(rows) == 0 {
		return `<div class="nd" style="top:90px">No data</div>`
	}
	var cols []string
	seen := map[string]bool{}
	for _, row := range rows {
		for _, k := range sortedKeys(row) {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	var b strings.Builder
	b.WriteString("<table><tr>")
	for _, c := range cols {
		b.WriteString("<th>" + html.EscapeString(c) + "</th>")
	}
	b.WriteString("</tr>")
	for _, row := range rows {
		b.WriteString("<tr>")
		for _, c := range cols {
			b.WriteString("<td>" + html.EscapeString(row[c]) + "</td>")
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
	return b.String()
}

// statHTML draws each series' last value in large type, named when there are several.
func statHTML(ss []named, unit string, bodyH int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<div class="stat" style="top:%dpx;height:%dpx">`, panelTitle, bodyH)
	shown := 0
	for _, s := range ss {
		v, ok := s.last()
		if !ok {
			continue
		}
		shown++
		fmt.Fprintf(&b, `<b style="color:%s">%s</b>`, palette[0], html.EscapeString(formatValue(v, unit)))
		if len(ss) > 1 {
			fmt.Fprintf(&b, `<em>%s</em>`, html.EscapeString(s.Name))
		}
	}
	if shown == 0 {
		b.WriteString(`<em>No data</em>`)
	}
	b.WriteString("</div>")
	return b.String()
}

// legendRows is how many rows of w pixels the legend items need, laid out left to right.
func legendRows(names []string, w int) int {
	rows, x := 1, 0.0
	for _, n := range names {
		iw := 19 + float64(len([]rune(n)))*legendCharPx + 14
		if x > 0 && x+iw > float64(w) {
			rows++
			x = 0
		}
		x += iw
	}
	return rows
}

// timeseriesHTML draws a time-series panel: the chart as inline SVG, and the legend below it,
// at most half the body high (items past that are cut off, as Grafana scrolls them).
func timeseriesHTML(p panel, ss []named, w, bodyH int, from, to time.Time, step time.Duration) string {
	if len(ss) == 0 {
		return fmt.Sprintf(`<div class="nd" style="top:%dpx">No data</div>`, panelTitle+bodyH/2-8)
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	lgH := min(legendRows(names, w)*legendLine+4, bodyH/2)
	chartH := bodyH - lgH - panelPad
	var th []float64
	if p.FieldConfig.Defaults.Custom.ThresholdsStyle.Mode == "line" {
		for _, s := range p.FieldConfig.Defaults.Thresholds.Steps {
			if s.Value != nil {
				th = append(th, *s.Value)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<div style="position:absolute;left:%dpx;top:%dpx">`, panelPad, panelTitle)
	b.WriteString(chartSVG(ss, w, chartH, p.FieldConfig.Defaults.Unit, from, to, step, th))
	b.WriteString("</div>")
	fmt.Fprintf(&b, `<div class="lg" style="top:%dpx;height:%dpx">`, panelTitle+chartH+4, lgH)
	for i, n := range names {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, palette[i%len(palette)], html.EscapeString(n))
	}
	b.WriteString("</div>")
	return b.String()
}

// Chart margins inside the SVG: room for the y axis labels on the left and the time labels below.
const (
	axisLeft   = 58
	axisBottom = 18
	axisTop    = 6
	axisRight  = 6
)

// chartSVG draws series as lines over [from, to] in a w×h SVG: a y axis with round ticks
// (including 0 when every value is on one side of it), time ticks in UTC, one polyline per run
// of samples one step apart (a missing step breaks the line, as Grafana's null values do),
// and dashed lines at the threshold values that fall inside the axis.
func chartSVG(ss []named, w, h int, unit string, from, to time.Time, step time.Duration, thresholds []float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, pt := range s.Points {
			if finite(pt.V) {
				lo, hi = math.Min(lo, pt.V), math.Max(hi, pt.V)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	if hi == lo {
		hi = lo + 1
	}
	tick := axisStep((hi-lo)/4, unit)
	lo, hi = math.Floor(lo/tick)*tick, math.Ceil(hi/tick)*tick
	pw, ph := float64(w-axisLeft-axisRight), float64(h-axisTop-axisBottom)
	span := to.Sub(from).Seconds()
	x := func(t time.Time) float64 { return axisLeft + t.Sub(from).Seconds()/span*pw }
	y := func(v float64) float64 { return axisTop + (hi-v)/(hi-lo)*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="10" fill="#8e8e9c">`, w, h)
	for v := lo; v <= hi+tick/2; v += tick {
		yy := y(v)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2c3235"/>`, axisLeft, w-axisRight, yy, yy)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, axisLeft-5, yy+3.5, html.EscapeString(formatValue(v, unit)))
	}
	xt := timeStep(to.Sub(from), int(pw/80))
	for t := from.Truncate(xt).Add(xt); !t.After(to); t = t.Add(xt) {
		xx := x(t)
		layout := "15:04:05"
		if xt%time.Minute == 0 {
			layout = "15:04"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#22252b"/>`, xx, xx, axisTop, axisTop+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, xx, h-4, t.UTC().Format(layout))
	}
	for _, v := range thresholds {
		if v > lo && v < hi {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#F2495C" stroke-dasharray="6 4"/>`, axisLeft, w-axisRight, y(v), y(v))
		}
	}
	for i, s := range ss {
		color := palette[i%len(palette)]
		for _, run := range runs(s.Points, step) {
			if len(run) == 1 {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.5" fill="%s"/>`, x(run[0].T), y(run[0].V), color)
				continue
			}
			b.WriteString(`<polyline fill="none" stroke="` + color + `" stroke-width="1.5" stroke-linejoin="round" points="`)
			for j, pt := range run {
				if j > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%.1f,%.1f", x(pt.T), y(pt.V))
			}
			b.WriteString(`"/>`)
		}
	}
	b.WriteString("</svg>")
	return b.String()
}

// runs splits samples into runs drawn as one line each: a sample that is not a number, or a
// missing step (query_range leaves out the steps where a series had no sample), ends a run.
func runs(pts []point, step time.Duration) [][]point {
	var out [][]point
	var cur []point
	for _, pt := range pts {
		if !finite(pt.V) {
			if len(cur) > 0 {
				out, cur = append(out, cur), nil
			}
			continue
		}
		if len(cur) > 0 && pt.T.Sub(cur[len(cur)-1].T) > step*3/2 {
			out, cur = append(out, cur), nil
		}
		cur = append(cur, pt)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || !finite(raw) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// axisStep is the y axis tick for a raw step: in seconds, half and whole minutes or hours
// once the step is longer than 20s (30 s, 1 min, 2 min rather than 50 s, 100 s), else niceStep.
func axisStep(raw float64, unit string) float64 {
	if unit == "s" {
		switch {
		case raw >= 3600:
			return niceStep(raw/3600) * 3600
		case raw > 20:
			for _, m := range []float64{0.5, 1, 2, 5, 10, 15, 30, 60} {
				if raw <= m*60 {
					return m * 60
				}
			}
		}
	}
	return niceStep(raw)
}

// timeStep is the smallest round time tick that puts at most n ticks on span.
func timeStep(span time.Duration, n int) time.Duration {
	steps := []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute,
		2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour}
	for _, s := range steps {
		if span/s <= time.Duration(max(n, 1)) {
			return s
		}
	}
	return 6 * time.Hour
}

// formatValue spells v in the panel's Grafana unit: "s" (seconds, scaled to ms, min, hour or
// day), "ops" (per second) or none (a short number with K, Mil, Bil).
func formatValue(v float64, unit string) string {
	switch unit {
	case "s":
		a := math.Abs(v)
		switch {
		case a == 0:
			return "0 s"
		case a < 1:
			return short(v*1000) + " ms"
		case a < 60:
			return short(v) + " s"
		case a < 3600:
			return short(v/60) + " min"
		case a < 86400:
			return short(v/3600) + " hour"
		default:
			return short(v/86400) + " day"
		}
	case "ops":
		return short(v) + " ops/s"
	default:
		return short(v)
	}
}

// short spells v with at most three significant digits before a K, Mil or Bil suffix, and
// no trailing zeros.
func short(v float64) string {
	a := math.Abs(v)
	suffix := ""
	switch {
	case a >= 1e9:
		v, suffix = v/1e9, " Bil"
	case a >= 1e6:
		v, suffix = v/1e6, " Mil"
	case a >= 1e3:
		v, suffix = v/1e3, " K"
	}
	dec := 0
	switch a := math.Abs(v); {
	case a < 10:
		dec = 2
	case a < 100:
		dec = 1
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s + suffix
}
