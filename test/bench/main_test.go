package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/test/mongosim"
)

// stallAfter bounds every wait of a benchmark: a run that makes no progress for this long fails
// the benchmark instead of hanging it.
const stallAfter = 2 * time.Minute

// childEnv, set to "1", makes the test binary serve mongosim instead of running benchmarks: it
// prints the server's URI on a line of its own, serves until its stdin closes, then exits.
// BenchmarkIdleStreamMemory uses it so that the server's memory is not in the process measured.
const childEnv = "WATCHTREE_BENCH_MONGOSIM_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(serveMongosim())
	}
	os.Exit(m.Run())
}

func serveMongosim() int {
	// WATCHTREE_BENCH_MONGOSIM_CPUPROFILE names a file for a CPU profile of the child (the
	// server's side of a benchmark), written when it exits.
	if path := os.Getenv("WATCHTREE_BENCH_MONGOSIM_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mongosim cpu profile:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "mongosim cpu profile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	srv, err := mongosim.Start(context.Background(), mongosim.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mongosim:", err)
		return 1
	}
	fmt.Println(srv.URI())
	// Until the parent closes our stdin (or dies). A line "gc" asks for a collection now
	// (mongosimChild.settle), answered with the line "gc" once it is done.
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "gc" {
			runtime.GC()
			fmt.Println("gc")
		}
	}
	_ = srv.Close()
	return 0
}

// startMongosimProcess runs mongosim in a child process (this test binary, re-executed with
// childEnv) and returns its URI; cleanup closes the child's stdin and waits for it to exit.
func startMongosimProcess(b *testing.B) string {
	b.Helper()
	return startMongosimChild(b).uri
}

// mongosimChild is a mongosim server in a child process.
type mongosimChild struct {
	uri  string
	pid  int
	in   io.Writer     // the child's stdin
	acks chan struct{} // a value per "gc" line the child printed
}

// settle collects the garbage of both processes, the child's first, so that a measured phase
// does not pay for the collections its preparation (the backlog insert) made due, and both
// consumers compared start each phase from the same heaps. Without it, the server's CPU per
// event of the same phase ranged from 3.4 to 13.9 µs within one run of
// BenchmarkAgainstReference (5.6 to 7.3 µs with it): the child's heap holds the whole oplog, so
// one of its collections more or less in a phase weighs.
func (c *mongosimChild) settle(b *testing.B) {
	b.Helper()
	if _, err := io.WriteString(c.in, "gc\n"); err != nil {
		b.Fatalf("mongosim child: %v", err)
	}
	select {
	case <-c.acks:
	case <-time.After(30 * time.Second):
		b.Fatal("mongosim child: no answer to gc after 30s")
	}
	runtime.GC()
}

// startMongosimChild is startMongosimProcess that returns the child, for cpu and settle.
func startMongosimChild(b *testing.B) *mongosimChild {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	b.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	child := &mongosimChild{pid: cmd.Process.Pid, in: stdin, acks: make(chan struct{}, 1)}
	lines := make(chan string, 1)
	go func() { // owned by the child: ends when its stdout closes
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() {
			if sc.Text() == "gc" {
				child.acks <- struct{}{}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	select {
	case uri, ok := <-lines:
		if !ok || !strings.HasPrefix(uri, "mongodb://") {
			b.Fatalf("mongosim child: no URI (got %q)", uri)
		}
		child.uri = uri
		return child
	case <-time.After(30 * time.Second):
		b.Fatal("mongosim child: no URI after 30s")
	}
	return nil
}

// cpu returns the CPU time the child's threads have run so far, the sum of the first field of
// each /proc/<pid>/task/<tid>/schedstat (nanoseconds; the kernel's clock-tick
// counters in /proc/<pid>/stat are too coarse for phases of half a second). A Go server's
// threads live as long as the process, so no time is lost with an exited thread. It returns 0
// where /proc has no schedstat (the metric then reads 0).
func (c *mongosimChild) cpu() time.Duration {
	pid := c.pid
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(raw)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				total += ns
			}
		}
	}
	return time.Duration(total)
}
