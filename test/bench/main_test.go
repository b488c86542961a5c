package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/watchtree/watchtree/test/mongosim"
)

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
	srv, err := mongosim.Start(context.Background(), mongosim.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mongosim:", err)
		return 1
	}
	fmt.Println(srv.URI())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin (or dies)
	_ = srv.Close()
	return 0
}

// startMongosimProcess runs mongosim in a child process (this test binary, re-executed with
// childEnv) and returns its URI; cleanup closes the child's stdin and waits for it to exit.
func startMongosimProcess(b *testing.B) string {
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
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	select {
	case uri, ok := <-lines:
		if !ok || !strings.HasPrefix(uri, "mongodb://") {
			b.Fatalf("mongosim child: no URI (got %q)", uri)
		}
		return uri
	case <-time.After(30 * time.Second):
		b.Fatal("mongosim child: no URI after 30s")
	}
	return ""
}
