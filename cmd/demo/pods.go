package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// podProc is one pod process, as the demo runs it.
type podProc struct {
	name string
	run  int
	cmd  *exec.Cmd

	stdin io.WriteCloser
	ready chan report   // the ready report (once), or a fatal one
	done  chan struct{} // closed when the process has exited and its output is read

	mu       sync.Mutex
	console  string // the console's address, from the ready report
	stderr   bytes.Buffer
	exitErr  error
	killed   bool
	counts   podCounts // the latest counts report
	verified chan report
}

// startPodProc starts pod name (its run-th process) as a copy of the demo's binary exe; every
// report it writes goes to onReport, on the process's reader goroutine.
func startPodProc(exe string, cfg podConfig, onReport func(*podProc, report)) (*podProc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p := &podProc{name: cfg.Name, run: cfg.Run, ready: make(chan report, 1), done: make(chan struct{}),
		verified: make(chan report, 1)}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(os.Environ(), envPod+"="+string(raw))
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pod %s: %w", cfg.Name, err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		readySent := false
		for sc.Scan() {
			var rep report
			if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
				continue // not a report (a stray line): ignored
			}
			switch rep.Kind {
			case "ready", "fatal":
				if !readySent {
					p.ready <- rep
					readySent = true
				}
			case "counts":
				p.mu.Lock()
				p.counts = *rep.Counts
				p.mu.Unlock()
			case "verified":
				select {
				case p.verified <- rep:
				default:
				}
			}
			onReport(p, rep)
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		if !readySent {
			p.ready <- report{Kind: "fatal", Pod: p.name, Error: fmt.Sprintf("exited before it was ready: %v: %s", err, p.stderrText())}
		}
	}()
	return p, nil
}

// kill ends the process with SIGKILL: no drain, no checkpoint flush, no lease release.
func (p *podProc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
}

// stop asks the pod for a graceful stop (SIGTERM) and waits for it, at most within; then it
// kills it. It returns the pod's error when it did not stop cleanly.
func (p *podProc) stop(within time.Duration) error {
	select {
	case <-p.done:
		return p.exit()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exit()
	case <-time.After(within):
		p.kill()
		<-p.done
		return fmt.Errorf("pod %s did not stop within %v: killed", p.name, within)
	}
}

// exit is the process's exit error, nil for a clean exit or one the demo caused (kill).
func (p *podProc) exit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr == nil || p.killed {
		return nil
	}
	return fmt.Errorf("pod %s: %w: %s", p.name, p.exitErr, p.stderr.String())
}

func (p *podProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *podProc) latestCounts() podCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

func (p *podProc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// send writes a command line to the pod's stdin.
func (p *podProc) send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
