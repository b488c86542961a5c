package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// machine describes where and when the benchmarks ran.
type machine struct {
	CPU        string
	Cores      int
	LoadStart  string // /proc/loadavg's 1, 5 and 15 minute averages at the start
	LoadEnd    string // and at the end
	LoadMax1   float64
	Start, End time.Time
	GoVersion  string
	Commit     string
	Command    string
}

// stats is the median and range of one figure over the runs.
type stats struct {
	N             int
	Med, Min, Max float64
}

func summarize(vs []float64) stats {
	if len(vs) == 0 {
		return stats{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{N: len(s), Med: med, Min: s[0], Max: s[len(s)-1]}
}

// ratios divides the i-th figure by the i-th baseline: run i of both was measured in the same
// pass of the same `go test` process.
func ratios(fig, base []float64) []float64 {
	n := min(len(fig), len(base))
	out := make([]float64, 0, n)
	for i := range n {
		if base[i] != 0 {
			out = append(out, fig[i]/base[i])
		}
	}
	return out
}

// rowResult is a row with its figures from the run.
type rowResult struct {
	row
	Fig, Base, Quot stats
	Ran             bool // the benchmark printed at least one result
}

func evaluate(out output, rs []row) []rowResult {
	ran := map[string]bool{}
	for _, r := range out.Results {
		ran[r.Name] = true
	}
	res := make([]rowResult, 0, len(rs))
	for _, r := range rs {
		rr := rowResult{row: r, Ran: ran[r.Bench]}
		fig := out.runs(r.Bench, r.Metric)
		rr.Fig = summarize(fig)
		if r.BaseMetric != "" {
			bb := r.BaseBench
			if bb == "" {
				bb = r.Bench
			}
			base := out.runs(bb, r.BaseMetric)
			rr.Base = summarize(base)
			if r.Ratio != "" {
				rr.Quot = summarize(out.runs(r.Bench, r.Ratio))
			} else {
				rr.Quot = summarize(ratios(fig, base))
			}
		} else if r.Ratio != "" {
			rr.Quot = summarize(out.runs(r.Bench, r.Ratio))
		}
		res = append(res, rr)
	}
	return res
}

// num formats v with a precision that fits its size: 1,234,567; 123; 12.3; 1.23; 0.0712.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		s := fmt.Sprintf("%.0f", v)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%#.3g", v) // three significant digits, trailing zeros kept: 0.500
	}
}

// cell renders a figure as "median (min–max)", or "—" when the run gave none.
func cell(s stats, suffix string) string {
	switch {
	case s.N == 0:
		return "—"
	case s.N == 1 || num(s.Min) == num(s.Max): // a range that prints as one value is none
		return num(s.Med) + suffix
	default:
		return fmt.Sprintf("%s%s (%s–%s)", num(s.Med), suffix, num(s.Min), num(s.Max))
	}
}

// render writes docs/benchmarks.md. It returns the problems a reader must know about: failed
// benchmarks and rows without a figure; the caller exits non-zero when there are any.
func render(w io.Writer, m machine, out output, filter string, count int) []string {
	var problems []string
	if len(out.Results) == 0 {
		problems = append(problems, fmt.Sprintf("no benchmark result: does -bench %q (BENCH) match any benchmark?", filter))
	}
	res := evaluate(out, rows)
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "Written by `make bench` (`internal/cmd/benchreport`) from the run below; do not edit by hand: run it\n")
	fmt.Fprintf(w, "again. Each figure is the median over the runs, with the range over the runs in brackets. A\n")
	fmt.Fprintf(w, "baseline is measured in the same run, and a ratio is taken run by run (figure of run i / baseline\n")
	fmt.Fprintf(w, "of run i), or as the benchmark itself reports it (a median over rounds inside one run). The raw\n")
	fmt.Fprintf(w, "`go test` output is `docs/benchmarks.txt`.\n\n")

	fmt.Fprintf(w, "| run | |\n| --- | --- |\n")
	fmt.Fprintf(w, "| date | %s to %s (%s) |\n", m.Start.UTC().Format("2006-01-02 15:04 MST"), m.End.UTC().Format("15:04 MST"),
		m.End.Sub(m.Start).Round(time.Second))
	cpu := m.CPU
	if cpu == "" {
		cpu = out.CPU
	}
	cores := "cores unknown"
	if m.Cores > 0 {
		cores = fmt.Sprintf("%d cores", m.Cores)
	}
	fmt.Fprintf(w, "| machine | %s, %s |\n", orUnknown(cpu), cores)
	highest := "unknown"
	if m.LoadStart != "" {
		highest = num(m.LoadMax1)
	}
	fmt.Fprintf(w, "| load average (1, 5, 15 min) | %s at the start, %s at the end; highest 1-minute average seen: %s |\n",
		orUnknown(m.LoadStart), orUnknown(m.LoadEnd), highest)
	fmt.Fprintf(w, "| runs | %d of each benchmark (`BENCH_COUNT`), filter `%s` (`BENCH`) |\n", count, filter)
	fmt.Fprintf(w, "| Go, commit | %s, %s |\n", orUnknown(m.GoVersion), orUnknown(m.Commit))
	fmt.Fprintf(w, "| command | `%s` |\n\n", m.Command)
	if m.Cores > 0 && m.LoadMax1 > float64(m.Cores) {
		fmt.Fprintf(w, "The machine was shared: its load went above its %d cores during the run, so absolute figures are\n", m.Cores)
		fmt.Fprintf(w, "lower and ranges wider than on a quiet machine; the ratios, whose two sides ran under the same load,\n")
		fmt.Fprintf(w, "are the figures to compare.\n\n")
	}

	group := ""
	for _, r := range res {
		if !r.Ran && filter != "." {
			continue // filtered out
		}
		if r.Group != group {
			group = r.Group
			fmt.Fprintf(w, "\n## %s\n\n", group)
			fmt.Fprintf(w, "| what | benchmark | figure | baseline | ratio | target |\n| --- | --- | --- | --- | --- | --- |\n")
		}
		base, ratio := "none (an absolute figure)", "—"
		if r.BaseMetric != "" {
			base = cell(r.Base, "")
			ratio = cell(r.Quot, "×")
		} else if r.Ratio != "" {
			ratio = cell(r.Quot, "×")
		}
		fig := cell(r.Fig, "")
		if fig != "—" {
			fig += " " + r.Metric
		}
		if base != "—" && r.BaseMetric != "" {
			base += " " + r.BaseMetric
		}
		target := r.Target
		if target == "" {
			target = "—"
		}
		if !r.Ran {
			fig = "**no result**"
			problems = append(problems, fmt.Sprintf("%s: no result", r.Bench))
		} else if r.Fig.N == 0 {
			fig = "**not reported**"
			problems = append(problems, fmt.Sprintf("%s: no %s", r.Bench, r.Metric))
		}
		fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s | %s |\n", r.Label, r.Bench, fig, base, ratio, target)
	}

	if len(out.Failures) > 0 {
		fmt.Fprintf(w, "\n## Failures\n\n")
		for _, f := range out.Failures {
			fmt.Fprintf(w, "- `%s`\n", f)
			problems = append(problems, f)
		}
	}

	fmt.Fprintf(w, "\n## Every figure reported\n\n")
	fmt.Fprintf(w, "Median (range) of each unit each benchmark reported, rows above or not.\n\n")
	fmt.Fprintf(w, "| benchmark | runs | figures |\n| --- | --- | --- |\n")
	for _, name := range benchNames(out) {
		var units []string
		n := 0
		for _, r := range out.Results {
			if r.Name == name {
				n++
				for u := range r.Metrics {
					if !contains(units, u) {
						units = append(units, u)
					}
				}
			}
		}
		sort.Strings(units)
		parts := make([]string, 0, len(units))
		for _, u := range units {
			parts = append(parts, cell(summarize(out.runs(name, u)), " "+u))
		}
		fmt.Fprintf(w, "| `%s` | %d | %s |\n", name, n, strings.Join(parts, "; "))
	}
	return problems
}

func benchNames(out output) []string {
	var names []string
	for _, r := range out.Results {
		if !contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	return names
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
