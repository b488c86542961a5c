package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// tool names an external program the renderer runs and the Debian package that provides it,
// so that a missing one fails with what to install.
type tool struct {
	Names   []string // executable names, tried in order
	Package string   // the Debian package
}

var (
	prometheusTool = tool{Names: []string{"prometheus"}, Package: "prometheus"}
	chromiumTool   = tool{Names: []string{"chromium", "chromium-browser", "google-chrome"}, Package: "chromium"}
)

// find returns the path of the first of the tool's executables on PATH, or an error naming the
// package to install.
func (t tool) find() (string, error) {
	for _, n := range t.Names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH: install it with `apt-get install -y %s` (needed only by make dashboard-png)", t.Names[0], t.Package)
}

// proc is a child process started in a process group of its own, so that stop ends it and
// every process it started (chromium's renderers and zygotes). The child also gets SIGKILL
// when this process dies, so that an interrupted run leaves nothing behind.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the Wait result, valid once done is closed
}

// startProc starts path with args, its output appended to logPath.
func startProc(name, logPath, path string, args ...string) (*proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to end by itself and returns its Wait error; a process
// still running after d is stopped and the error says so.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.stop()
		return fmt.Errorf("%s did not finish within %v", p.name, d)
	}
}

// stop ends the process group: SIGTERM, then SIGKILL if it has not ended within 5s. It waits
// for the process and is safe to call more than once.
func (p *proc) stop() {
	if p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // children it left behind
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the last lines of a process's log, for an error message: the log itself is
// removed with the run's temporary directory.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}
