package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// build compiles the soak's two binaries (mongosim and chaosnode) into dir.
func build(ctx context.Context, dir string) (mongosim, node string, err error) {
	mongosim, node = filepath.Join(dir, "mongosim"), filepath.Join(dir, "chaosnode")
	root, err := moduleDir()
	if err != nil {
		return "", "", err
	}
	for _, b := range []struct{ dir, out, pkg string }{
		{filepath.Join(root, "mongosim"), mongosim, "./cmd/mongosim"},
		{root, node, "./chaos/cmd/chaosnode"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return mongosim, node, nil
}

// moduleDir is the test module's directory (test/), found from the working directory.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if !strings.HasSuffix(mod, filepath.Join("test", "go.mod")) {
		return "", fmt.Errorf("run the soak from the test module (go env GOMOD = %q)", mod)
	}
	return filepath.Dir(mod), nil
}

// proc is a child process the soak started; kill and wait act on its pid only.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// spawner starts the soak's child processes, all from one goroutine locked to its OS thread.
// Each child gets Pdeathsig SIGKILL, so that it dies with the soak however the soak dies
// (SIGKILL included). The kernel ties Pdeathsig to the thread that forked the child, not to
// the process: had the child been forked from any thread of the Go runtime, it would be
// killed the day that thread exits (the runtime ends a thread whose goroutine exits while
// locked to it, as netns code often does). The spawner's thread lives until close, after
// every child has been stopped. Pdeathsig survives the exec of ip netns exec and of the node
// it execs (neither is set-user-ID); the node also has a lifeline (startProc).
type spawner struct {
	reqs chan func()
	done chan struct{}
}

func newSpawner() *spawner {
	sp := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		// Never unlocked: when the soak closes the spawner, the thread ends with the goroutine.
		runtime.LockOSThread()
		defer close(sp.done)
		for f := range sp.reqs {
			f()
		}
	}()
	return sp
}

// run runs f on the spawner's thread.
func (sp *spawner) run(f func()) {
	ran := make(chan struct{})
	sp.reqs <- func() { f(); close(ran) }
	<-ran
}

// close ends the spawner's goroutine and thread; call it once its children are gone.
func (sp *spawner) close() {
	close(sp.reqs)
	<-sp.done
}

// startProc starts name with args through sp. With stdout nil, the child's stdout is
// returned as a reader. With lifeline, the child's stdin is a pipe whose write end only the
// soak holds: the node reads it and exits at EOF, which comes when the soak dies, however it
// dies (a second guard beside Pdeathsig, and one that needs no thread to stay alive).
func startProc(sp *spawner, name string, args []string, stdout *os.File, logf *os.File, lifeline bool) (*proc, *bufio.Reader, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = logf
	var rd *bufio.Reader
	if stdout == nil {
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		rd = bufio.NewReader(pipe)
	} else {
		cmd.Stdout = stdout
	}
	var lifeW *os.File
	if lifeline {
		r, w, err := os.Pipe() // close-on-exec: no other child inherits the write end
		if err != nil {
			return nil, nil, fmt.Errorf("lifeline pipe: %w", err)
		}
		defer r.Close() // the child's copy is enough
		cmd.Stdin, lifeW = r, w
	}
	// Its own process group: a Ctrl-C of the soak reaches the soak alone, which then stops
	// its children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	sp.run(func() { err = cmd.Start() })
	if err != nil {
		if lifeW != nil {
			lifeW.Close()
		}
		return nil, nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if lifeW != nil {
			lifeW.Close()
		}
		close(p.done)
	}()
	return p, rd, nil
}

func (p *proc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGCONT and SIGTERM, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-p.done
		return errors.New("killed after the grace period")
	}
}

func (p *proc) kill() {
	if !p.exited() {
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// readLine reads rd's lines until one satisfies ok, within d.
func readLine(rd *bufio.Reader, d time.Duration, ok func(string) bool) (string, error) {
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				ch <- res{"", err}
				return
			}
			if l = strings.TrimSpace(l); ok(l) {
				ch <- res{l, nil}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-time.After(d):
		return "", fmt.Errorf("no expected line within %v", d)
	}
}

// node is one chaosnode: its proxies stay for the whole soak, its process changes on restart.
type node struct {
	name         string
	mongo, redis *Proxy
	mu           sync.Mutex
	p            *proc
	runs         int
	stopped      bool     // SIGSTOPped
	net          *netHost // its network namespace; nil on loopback (the proxies partition)
}
