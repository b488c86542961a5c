package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// A result is one line of `go test -bench` output: one run of one benchmark.
type result struct {
	Pkg     string             // from the "pkg:" line before it
	Name    string             // without the -GOMAXPROCS suffix, e.g. "BenchmarkLanes" or "BenchmarkX/lanes=8"
	Procs   int                // the -GOMAXPROCS suffix, 1 when absent
	Iters   int64              // b.N
	Metrics map[string]float64 // unit -> value, e.g. "ns/op", "events/s", "ratio"
}

// output is a whole `go test -bench` run, parsed.
type output struct {
	CPU      string   // the first "cpu:" line
	Results  []result // in the order printed
	Failures []string // "--- FAIL: ..." and "FAIL\t<pkg>" lines, and panics
}

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// parse reads the standard benchmark text format (the one `go test -bench` prints and
// golang.org/x/perf's benchfmt reads): configuration lines "key: value", result lines
// "BenchmarkName-P  N  v1 unit1  v2 unit2 ...", and anything else (logs, PASS/ok lines), of
// which only failures are kept.
func parse(r io.Reader) (output, error) {
	var out output
	pkg, pending := "", ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimSpace(strings.TrimPrefix(line, "pkg: "))
		case strings.HasPrefix(line, "cpu: "):
			if out.CPU == "" {
				out.CPU = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
			}
		case strings.HasPrefix(line, "--- FAIL"), strings.HasPrefix(line, "FAIL\t"), strings.HasPrefix(line, "FAIL "),
			strings.HasPrefix(line, "panic: "):
			out.Failures = append(out.Failures, strings.TrimSpace(line))
		case strings.HasPrefix(line, "Benchmark"):
			if res, ok := parseResult(line); ok {
				res.Pkg = pkg
				out.Results = append(out.Results, res)
				pending = ""
			} else if f := strings.Fields(line); len(f) == 1 {
				pending = f[0] // a slow benchmark: its figures follow after output of its own
			}
		default:
			if pending == "" {
				continue
			}
			// The figures of the pending benchmark, after log output that ran into the line.
			f := strings.Fields(line)
			for i := range f {
				if res, ok := parseResult(pending + " " + strings.Join(f[i:], " ")); ok {
					res.Pkg = pkg
					out.Results = append(out.Results, res)
					pending = ""
					break
				}
			}
		}
	}
	return out, sc.Err()
}

// parseResult parses one result line; ok is false for a line that only starts like one (a
// benchmark's log output, or the name printed alone before a slow benchmark's figures).
func parseResult(line string) (result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 { // name, N, then value/unit pairs
		return result{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return result{}, false
	}
	res := result{Name: f[0], Procs: 1, Iters: iters, Metrics: map[string]float64{}}
	if m := procsSuffix.FindStringSubmatch(f[0]); m != nil {
		res.Procs, _ = strconv.Atoi(m[1])
		res.Name = strings.TrimSuffix(f[0], m[0])
	}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return result{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
}

// runs returns the values of unit reported by the benchmark name, in run order.
func (o output) runs(name, unit string) []float64 {
	var vs []float64
	for _, r := range o.Results {
		if r.Name != name {
			continue
		}
		if v, ok := r.Metrics[unit]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}
