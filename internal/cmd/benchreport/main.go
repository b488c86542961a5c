// Command benchreport runs every benchmark of the repository's modules several times and writes
// docs/benchmarks.md: each figure with the baseline measured in the same run, their ratio, the
// range over the runs, the machine, its load and the date. `make bench` runs it; the figures
// come from the run, never from this source.
//
//	go run ./internal/cmd/benchreport -count 3 -bench . -out docs/benchmarks.md
//	go run ./internal/cmd/benchreport -modules '. test/mongosim test'  # go test in each module, one report
//	go run ./internal/cmd/benchreport -in recorded.txt -out /tmp/report.md  # render a recorded run
//
// It exits 1 when a benchmark failed or a row of the report has no figure, after writing the
// report (which lists them), and 2 on bad usage.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, logw io.Writer) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(logw)
	count := fs.Int("count", 3, "runs of each benchmark (go test -count); at least 1")
	filter := fs.String("bench", ".", "benchmark filter (go test -bench)")
	pkgs := fs.String("pkgs", "./...", "packages, space-separated (in each of -modules)")
	modules := fs.String("modules", ".", "module directories, space-separated: go test runs in each, in this order, into one report")
	benchtime := fs.String("benchtime", "", "go test -benchtime, empty for go test's default")
	timeout := fs.Duration("timeout", 60*time.Minute, "go test -timeout")
	outPath := fs.String("out", "docs/benchmarks.md", "the report to write")
	rawPath := fs.String("raw", "docs/benchmarks.txt", "where to keep the raw go test output (empty: nowhere)")
	in := fs.String("in", "", "render a recorded go test output instead of running the benchmarks")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *count < 1 {
		fmt.Fprintf(logw, "benchreport: -count must be >= 1, got %d\n", *count)
		return 2
	}

	var m machine
	var raw []byte
	if *in != "" {
		b, err := os.ReadFile(*in)
		if err != nil {
			fmt.Fprintf(logw, "benchreport: %v\n", err)
			return 2
		}
		raw = b
		m.Command = "rendered from " + *in
		if st, err := os.Stat(*in); err == nil {
			m.Start, m.End = st.ModTime(), st.ModTime()
		}
		readHeader(b, &m, count, filter) // a run this program recorded says where and when it ran
	} else {
		m = machine{Cores: runtime.NumCPU(), CPU: cpuModel(), GoVersion: goVersion(), Commit: commit()}
		goArgs := []string{"test", "-run", "^$", "-bench", *filter, "-benchmem", "-count", strconv.Itoa(*count),
			"-timeout", timeout.String()}
		if *benchtime != "" {
			goArgs = append(goArgs, "-benchtime", *benchtime)
		}
		goArgs = append(goArgs, strings.Fields(*pkgs)...)
		dirs := strings.Fields(*modules)
		if len(dirs) == 0 {
			dirs = []string{"."}
		}
		m.Command = commandLine(dirs, goArgs)
		fmt.Fprintf(logw, "benchreport: %s\n", m.Command)

		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		var buf bytes.Buffer
		sampler := startLoadSampler(&m)
		m.Start = time.Now()
		for _, dir := range dirs {
			if ctx.Err() != nil {
				break
			}
			cmd := exec.CommandContext(ctx, goTool(), goArgs...)
			cmd.Dir = dir
			cmd.Stdout = io.MultiWriter(&buf, logw)
			cmd.Stderr = io.MultiWriter(&buf, logw)
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(logw, "benchreport: go test in %s: %v (the report lists the failures)\n", dir, err)
			}
		}
		m.End = time.Now()
		sampler()
		raw = append(header(m, *count, *filter), buf.Bytes()...)
		if *rawPath != "" {
			if err := os.WriteFile(*rawPath, raw, 0o644); err != nil {
				fmt.Fprintf(logw, "benchreport: %v\n", err)
				return 1
			}
		}
	}

	out, err := parse(bytes.NewReader(raw))
	if err != nil {
		fmt.Fprintf(logw, "benchreport: reading the output: %v\n", err)
		return 1
	}
	var doc bytes.Buffer
	problems := render(&doc, m, out, *filter, *count)
	if err := os.WriteFile(*outPath, doc.Bytes(), 0o644); err != nil {
		fmt.Fprintf(logw, "benchreport: %v\n", err)
		return 1
	}
	fmt.Fprintf(logw, "benchreport: wrote %s (%d results)\n", *outPath, len(out.Results))
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(logw, "benchreport: %s\n", p)
		}
		return 1
	}
	return 0
}

// commandLine is the shell command that runs the benchmarks as benchreport does: go test with
// goArgs, in each of dirs ("go test ..." alone for the current directory only).
func commandLine(dirs, goArgs []string) string {
	test := "go " + strings.Join(goArgs, " ")
	if len(dirs) == 1 && dirs[0] == "." {
		return test
	}
	return "for m in " + strings.Join(dirs, " ") + "; do (cd $m && " + test + "); done"
}

// headerPrefix starts the lines in which a recorded run keeps its machine, load and dates, so
// that -in renders it as it was measured. go test's own output never has such lines.
const headerPrefix = "benchreport-"

// headerField is one header line of a recorded run: its key, its value as written, and how a
// value read back is stored (one that does not parse is left as it was).
type headerField struct {
	key   string
	value func() string
	read  func(v string)
}

// headerFields lists the header lines, in the order header writes them, over m, count and
// filter: header and readHeader both go through it, so a key is spelled once.
func headerFields(m *machine, count *int, filter *string) []headerField {
	str := func(k string, p *string) headerField {
		return headerField{k, func() string { return *p }, func(v string) { *p = v }}
	}
	num := func(k string, p *int) headerField {
		return headerField{k, func() string { return strconv.Itoa(*p) }, func(v string) {
			if n, err := strconv.Atoi(v); err == nil {
				*p = n
			}
		}}
	}
	at := func(k string, p *time.Time) headerField {
		return headerField{k, func() string { return p.UTC().Format(time.RFC3339) }, func(v string) {
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				*p = t
			}
		}}
	}
	load := headerField{"load-max1", func() string { return strconv.FormatFloat(m.LoadMax1, 'f', 2, 64) }, func(v string) {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			m.LoadMax1 = f
		}
	}}
	return []headerField{at("start", &m.Start), at("end", &m.End), str("cpu", &m.CPU), num("cores", &m.Cores),
		str("load-start", &m.LoadStart), str("load-end", &m.LoadEnd), load, str("go", &m.GoVersion),
		str("commit", &m.Commit), str("command", &m.Command), num("count", count), str("filter", filter)}
}

// header is the recorded run's first lines, "benchreport-<key>: <value>" (the "key: value" form
// of the benchmark format's configuration lines).
func header(m machine, count int, filter string) []byte {
	var b bytes.Buffer
	for _, f := range headerFields(&m, &count, &filter) {
		fmt.Fprintf(&b, "%s%s: %s\n", headerPrefix, f.key, f.value())
	}
	return b.Bytes()
}

// readHeader fills m, count and filter from a recorded run's header lines; a value that does not
// parse is left as it was.
func readHeader(raw []byte, m *machine, count *int, filter *string) {
	fields := headerFields(m, count, filter)
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, headerPrefix), ": ")
		if !ok || !strings.HasPrefix(line, headerPrefix) {
			continue
		}
		for _, f := range fields {
			if f.key == k {
				f.read(v)
			}
		}
	}
}

func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// startLoadSampler records the load average now and every 10s until the returned func is
// called, which records the last one. The goroutine it starts ends when that func returns.
func startLoadSampler(m *machine) (stop func()) {
	l1, all := loadAvg()
	m.LoadStart, m.LoadMax1 = all, l1
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if l1, _ := loadAvg(); l1 > 0 {
					mu.Lock()
					m.LoadMax1 = max(m.LoadMax1, l1)
					mu.Unlock()
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		l1, all := loadAvg()
		m.LoadEnd, m.LoadMax1 = all, max(m.LoadMax1, l1)
	}
}

// loadAvg reads /proc/loadavg: the 1-minute average and "1m 5m 15m"; zero and "" where there
// is no such file.
func loadAvg() (float64, string) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, ""
	}
	return parseLoadAvg(string(b))
}

func parseLoadAvg(s string) (float64, string) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, ""
	}
	l1, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, ""
	}
	return l1, strings.Join(f[:3], ", ")
}

// cpuModel is /proc/cpuinfo's first "model name", or "" (go test's "cpu:" line is used then).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func goVersion() string {
	out, err := exec.Command(goTool(), "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

// commit is the checked-out commit, with "+ changes" when the tree differs from it.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " + uncommitted changes"
	}
	return c
}
