package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReadmeQuickstartIsThisProgram: the README's Quickstart is this file, to the byte, so the
// Quickstart compiles as written and TestQuickstartRuns checks what it does.
func TestReadmeQuickstartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Quickstart\n.*?```go\n(.*?)```\n").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block under ## Quickstart")
	}
	if got := string(m[1]); got != string(src) {
		t.Fatalf("the README's Quickstart differs from cmd/quickstart/main.go; copy the file into the README.\nREADME:\n%s", got)
	}
}

// syncBuffer is an io.Writer safe for the handler's lanes and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// TestQuickstartRuns: on mongosim (or on the replica set of WATCHTREE_MONGODB_URI, as every
// integration test), the quickstart charges each of its three orders exactly once and stops
// gracefully with all three handled.
func TestQuickstartRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out syncBuffer
	if err := run(ctx, os.Getenv("WATCHTREE_MONGODB_URI"), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.b.String())
	}
	got := out.b.String()
	for _, line := range []string{"charging order 1: 12.50\n", "charging order 2: 30.00\n", "charging order 3: 7.25\n"} {
		if strings.Count(got, line) != 1 {
			t.Errorf("output has %q %d times, want once:\n%s", line, strings.Count(got, line), got)
		}
	}
	if !strings.Contains(got, "stream charge-orders is stopped: 3 events handled, checkpoint written at ") {
		t.Errorf("output does not end with the stopped stream's status:\n%s", got)
	}
}
