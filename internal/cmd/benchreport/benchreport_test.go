package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func parseSample(t *testing.T) output {
	t.Helper()
	f, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseRecordedOutput(t *testing.T) {
	out := parseSample(t)
	if out.CPU != "Intel(R) Xeon(R) Processor" {
		t.Errorf("CPU = %q", out.CPU)
	}
	if len(out.Results) != 11 {
		t.Fatalf("%d results, want 11: %+v", len(out.Results), out.Results)
	}
	first := out.Results[0]
	if first.Name != "BenchmarkDecodeEvent/struct" || first.Procs != 2 || first.Iters != 329421 ||
		first.Pkg != "github.com/watchtree/watchtree" || first.Metrics["ns/op"] != 3633 || first.Metrics["allocs/op"] != 9 {
		t.Errorf("first result = %+v", first)
	}
	// A slow benchmark's name printed alone, its figures after a log line of the child server.
	h := out.runs("BenchmarkLeaderGracefulHandover", "handover-ms")
	if len(h) != 1 || h[0] != 3.7 {
		t.Errorf("handover-ms = %v, want [3.7]", h)
	}
	if got := out.runs("BenchmarkAgainstReference", "wt-cpu-µs/event"); len(got) != 1 || got[0] != 9.1 {
		t.Errorf("a unit with µ: %v", got)
	}
	if len(out.Failures) != 2 || !strings.Contains(out.Failures[0], "BenchmarkLeaderCrashFailover/redis") ||
		!strings.HasPrefix(out.Failures[1], "FAIL\tgithub.com/watchtree/watchtree/test/bench") {
		t.Errorf("failures = %q", out.Failures)
	}
}

func TestParseResultRejectsNonResults(t *testing.T) {
	for _, line := range []string{
		"BenchmarkX-2",                       // name alone
		"BenchmarkX-2 \tsome log words here", // log output
		"BenchmarkX-2 12 34",                 // a value without a unit
		"BenchmarkX-2 many 34 ns/op",         // no iteration count
		"BenchmarkX-2 1 abc ns/op",           // not a number
	} {
		if r, ok := parseResult(line); ok {
			t.Errorf("parseResult(%q) = %+v, want no result", line, r)
		}
	}
	r, ok := parseResult("BenchmarkPipelineOverhead/lanes=8 10 5 ns/op")
	if !ok || r.Procs != 1 || r.Name != "BenchmarkPipelineOverhead/lanes=8" {
		t.Errorf("without a -P suffix: %+v %v", r, ok)
	}
}

func TestEvaluateTakesMedianRangeAndRunByRunRatios(t *testing.T) {
	out := parseSample(t)
	rs := []row{
		{Group: "g", Label: "decode", Bench: "BenchmarkDecodeEvent/struct", Metric: "ns/op", BaseBench: "BenchmarkDecodeEvent/raw", BaseMetric: "ns/op"},
		{Group: "g", Label: "e2e", Bench: "BenchmarkEndToEnd", Metric: "watchtree-events/s", BaseMetric: "raw-events/s", Ratio: "ratio"},
		{Group: "g", Label: "absent", Bench: "BenchmarkInsert", Metric: "inserts/s"},
	}
	res := evaluate(out, rs)
	dec := res[0]
	if dec.Fig != (stats{N: 3, Med: 3633, Min: 3000, Max: 4000}) || dec.Base != (stats{N: 3, Med: 1500, Min: 1000, Max: 2000}) {
		t.Errorf("decode figure %+v baseline %+v", dec.Fig, dec.Base)
	}
	// Run by run: 3633/1500, 4000/2000, 3000/1000; not the ratio of the medians' runs mixed up.
	if dec.Quot.N != 3 || dec.Quot.Min != 2 || dec.Quot.Max != 3 || dec.Quot.Med != 3633.0/1500 {
		t.Errorf("decode ratio %+v", dec.Quot)
	}
	e2e := res[1]
	if e2e.Quot.N != 2 || math.Abs(e2e.Quot.Med-(1.089+1.2)/2) > 1e-12 || e2e.Quot.Min != 1.089 || e2e.Quot.Max != 1.2 {
		t.Errorf("a reported ratio is taken as reported: %+v", e2e.Quot)
	}
	if e2e.Fig.Med != (67337+72000)/2.0 {
		t.Errorf("even count: median of the middle two, got %v", e2e.Fig.Med)
	}
	if res[2].Ran || res[2].Fig.N != 0 {
		t.Errorf("a benchmark absent from the output: %+v", res[2])
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{
		3412345: "3,412,345", 1000: "1,000", -12345: "-12,345", 206: "206", 28.94: "28.9",
		1.128: "1.13", 0: "0.00", 0.0712: "0.0712", 0.000123: "0.000123", 0.5: "0.500",
	} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestParseLoadAvg(t *testing.T) {
	l1, all := parseLoadAvg("4.52 3.10 2.01 3/812 12345\n")
	if l1 != 4.52 || all != "4.52, 3.10, 2.01" {
		t.Errorf("got %v %q", l1, all)
	}
	if l1, all := parseLoadAvg("garbage"); l1 != 0 || all != "" {
		t.Errorf("garbage: %v %q", l1, all)
	}
}

func TestRenderWritesFiguresMachineAndProblems(t *testing.T) {
	out := parseSample(t)
	start := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	m := machine{CPU: "Test CPU", Cores: 2, LoadStart: "5.10, 4.00, 3.00", LoadEnd: "6.20, 5.00, 4.00", LoadMax1: 7.5,
		Start: start, End: start.Add(17*time.Minute + 3*time.Second), GoVersion: "go1.26.8", Commit: "abc", Command: "go test -bench ."}
	var buf bytes.Buffer
	problems := render(&buf, m, out, ".", 3)
	doc := buf.String()
	for _, want := range []string{
		"| date | 2026-12-01 22:00 UTC to 22:17 UTC (17m3s) |",
		"| machine | Test CPU, 2 cores |",
		"5.10, 4.00, 3.00 at the start, 6.20, 5.00, 4.00 at the end; highest 1-minute average seen: 7.50",
		"its load went above its 2 cores",
		"| 3 of each benchmark (`BENCH_COUNT`), filter `.` (`BENCH`) |",
		// figure, baseline and the run-by-run ratio with their ranges
		"`BenchmarkDecodeEvent/struct` | 3,633 (3,000–4,000) ns/op | 1,500 (1,000–2,000) ns/op | 2.42× (2.00–3.00) |",
		"`BenchmarkEndToEnd` | 69,668 (67,337–72,000) watchtree-events/s | 60,926 (60,000–61,852) raw-events/s | 1.14× (1.09–1.20) | ratio ≥ 0.9 |",
		"`BenchmarkLanes` | 4,725 lanes8-events/s | 826 lanes1-events/s | 5.72× | ≥ 7× |",
		"`BenchmarkInsert` | **no result** |",
		"## Failures",
		"- `--- FAIL: BenchmarkLeaderCrashFailover/redis`",
		"| `BenchmarkLeaderGracefulHandover` | 1 | 3.70 handover-ms; 1.61 handover/restart; 0.00370 handover/target-1s; 1,234,567,890 ns/op;",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(doc)
	}
	if !contains(problems, "BenchmarkInsert: no result") || !contains(problems, "--- FAIL: BenchmarkLeaderCrashFailover/redis") {
		t.Errorf("problems = %q", problems)
	}
	// A filtered run leaves out the rows it did not run, rather than calling them missing.
	buf.Reset()
	problems = render(&buf, m, out, "EndToEnd", 3)
	if strings.Contains(buf.String(), "`BenchmarkInsert`") || contains(problems, "BenchmarkInsert: no result") {
		t.Errorf("a filtered run reports a row it did not run: %q", problems)
	}
}

func TestRunRendersARecordedOutput(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "benchmarks.md")
	var log bytes.Buffer
	if code := run([]string{"-in", "testdata/sample.txt", "-out", dst}, &log); code != 1 {
		t.Fatalf("exit %d, want 1 (the sample has a failure); log:\n%s", code, log.String())
	}
	doc, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "`BenchmarkEndToEnd` | 69,668") {
		t.Errorf("report:\n%s", doc)
	}
	if !strings.Contains(string(doc), "| load average (1, 5, 15 min) | unknown at the start") {
		t.Errorf("a recording without a header must not claim this machine's load:\n%s", doc)
	}
	// A filter that matches nothing (a typo in BENCH) is a failure, not an empty report.
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, []byte("PASS\nok  \tgithub.com/watchtree/watchtree/policy\t0.011s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	if code := run([]string{"-in", empty, "-bench", "NoSuch", "-out", dst}, &log); code != 1 || !strings.Contains(log.String(), `-bench "NoSuch"`) {
		t.Errorf("no results: exit %d, log %q; want 1 naming the filter", code, log.String())
	}
	if code := run([]string{"-count", "0"}, io.Discard); code != 2 {
		t.Errorf("-count 0: exit %d, want 2", code)
	}
}

// TestHeaderRoundTrip: a run's header keeps its machine, load, dates and settings, so rendering
// the recorded output later (-in) gives the report of the run, not of the machine rendering it.
func TestHeaderRoundTrip(t *testing.T) {
	start := time.Date(2026, 12, 1, 22, 5, 0, 0, time.UTC)
	m := machine{CPU: "Some CPU @ 2GHz", Cores: 2, LoadStart: "5.04, 8.12, 5.33", LoadEnd: "10.04, 10.06, 7.69", LoadMax1: 14.4,
		Start: start, End: start.Add(12 * time.Minute), GoVersion: "go1.26.8", Commit: "0fb07bb4641a", Command: "go test -bench . ./..."}
	sample, err := os.ReadFile("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "benchmarks.txt")
	if err := os.WriteFile(src, append(header(m, 5, "Lanes|EndToEnd"), sample...), 0o644); err != nil {
		t.Fatal(err)
	}
	var got machine
	count, filter := 3, "."
	raw, _ := os.ReadFile(src)
	readHeader(raw, &got, &count, &filter)
	if got != m || count != 5 || filter != "Lanes|EndToEnd" {
		t.Errorf("read back %+v count %d filter %q, want %+v 5 %q", got, count, filter, m, "Lanes|EndToEnd")
	}
	dst := filepath.Join(t.TempDir(), "benchmarks.md")
	if code := run([]string{"-in", src, "-out", dst}, io.Discard); code != 1 {
		t.Fatalf("exit %d, want 1 (the sample has a failure)", code)
	}
	doc, _ := os.ReadFile(dst)
	for _, want := range []string{"| date | 2026-12-01 22:05 UTC to 22:17 UTC (12m0s) |", "| machine | Some CPU @ 2GHz, 2 cores |",
		"highest 1-minute average seen: 14.4", "| 5 of each benchmark (`BENCH_COUNT`), filter `Lanes|EndToEnd`", "0fb07bb4641a",
		"`BenchmarkEndToEnd` | 69,668"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	// The header lines are not results, and parse passes over them.
	out, err := parse(bytes.NewReader(raw))
	if err != nil || len(out.Results) != 11 {
		t.Errorf("parse with a header: %d results, %v", len(out.Results), err)
	}
}

var benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w+)\(b \*testing\.B\)`)

// TestEveryBenchmarkHasARow fails when a benchmark is added without a row in the report.
func TestEveryBenchmarkHasARow(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	found := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range benchFunc.FindAllStringSubmatch(string(src), -1) {
			found++
			ok := false
			for _, r := range rows {
				if r.Bench == m[1] || strings.HasPrefix(r.Bench, m[1]+"/") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: %s has no row in internal/cmd/benchreport/spec.go", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 20 {
		t.Fatalf("found %d benchmarks under %s; the walk is looking in the wrong place", found, root)
	}
}

func TestRowsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Group == "" || r.Label == "" || r.Bench == "" || r.Metric == "" {
			t.Errorf("incomplete row %+v", r)
		}
		if r.BaseBench != "" && r.BaseMetric == "" {
			t.Errorf("%s: BaseBench without BaseMetric", r.Label)
		}
		k := r.Bench + " " + r.Metric
		if seen[k] {
			t.Errorf("two rows for %s", k)
		}
		seen[k] = true
	}
}

// The recorded command runs go test in each module benchreport ran it in, as benchreport did.
func TestCommandLine(t *testing.T) {
	args := []string{"test", "-run", "^$", "-bench", ".", "./..."}
	if got, want := commandLine([]string{"."}, args), "go test -run ^$ -bench . ./..."; got != want {
		t.Errorf("one module: %q, want %q", got, want)
	}
	want := "for m in . test; do (cd $m && go test -run ^$ -bench . ./...); done"
	if got := commandLine([]string{".", "test"}, args); got != want {
		t.Errorf("two modules: %q, want %q", got, want)
	}
}
