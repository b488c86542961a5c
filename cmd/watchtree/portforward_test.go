package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// forward is a port-forward: it accepts on its own port and pipes each connection to target,
// as `kubectl port-forward` does. Only the CLI's own connections cross it.
type forward struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	open []net.Conn
}

func newForward(t *testing.T, target string) *forward {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forward{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			f.mu.Lock()
			f.open = append(f.open, in, out)
			f.mu.Unlock()
			for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
				f.wg.Add(1)
				go func() {
					defer f.wg.Done()
					_, _ = io.Copy(p[0], p[1])
					_ = p[0].Close()
				}()
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.open {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// TestCLIThroughAPortForward: with only a forwarded port to the console (the runtime cannot dial
// the CLI back), every kind of verb works: a read, a command and the live feed.
func TestCLIThroughAPortForward(t *testing.T) {
	fw := newForward(t, live.addr)
	addr := fw.ln.Addr().String()
	run1 := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		code := run(ctx, append([]string{"--addr", addr}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run1("streams"); code != 0 || !strings.Contains(out, "spare") {
		t.Fatalf("streams through the forward: exit %d, %q, %q", code, out, errs)
	}
	if code, out, errs := run1("restart", "spare", "--token", testToken); code != 0 || !strings.Contains(out, "restart spare") {
		t.Fatalf("restart through the forward: exit %d, %q, %q", code, out, errs)
	}
	// events (no -f) reads the backlog up to its end marker over the forward and returns.
	code, out, errs := run1("events", "--stream", "spare", "-o", "json")
	if code != 0 || !strings.Contains(out, `"kind":"command"`) {
		t.Fatalf("events through the forward: exit %d, %q, %q", code, out, errs)
	}
}
