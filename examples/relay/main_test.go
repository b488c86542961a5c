package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestMain: the program leaves no goroutine behind once run returned.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is an io.Writer safe for the workers and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// TestRelay: each of the 20 outbox messages reaches the consumer group exactly once, on its
// subject, with the outbox document as the payload, and the program's summary says so.
func TestRelay(t *testing.T) {
	url := os.Getenv("WATCHTREE_NATS_URL")
	if url == "" {
		c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 2*time.Second)
		if err != nil {
			t.Skipf("no NATS server answers on 127.0.0.1:4222 (%v) and WATCHTREE_NATS_URL is unset: start nats-server -js (.ci/run does)", err)
		}
		_ = c.Close()
		url = "nats://127.0.0.1:4222"
	}
	// A name of its own: another run on the same NATS server keeps its stream.
	name := fmt.Sprintf("watchtree_example_relay_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { deleteStream(url, name) })
	var out syncBuffer
	if err := run(context.Background(), os.Getenv("WATCHTREE_MONGODB_URI"), url, name, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.b.String())
	}
	got := out.b.String()
	line := regexp.MustCompile(`(?m)^worker [1-3]: ` + name + `\.outbox\.insert \{"_id":(\d+),"order":"order-\d+","event":"(created|paid)"\}$`)
	seen := map[string]int{}
	for _, m := range line.FindAllStringSubmatch(got, -1) {
		seen[m[1]]++
	}
	for id := 1; id <= messages; id++ {
		if n := seen[strconv.Itoa(id)]; n != 1 {
			t.Errorf("message %d consumed %d times, want once", id, n)
		}
	}
	if len(seen) != messages {
		t.Errorf("%d distinct messages consumed, want %d:\n%s", len(seen), messages, got)
	}
	if !regexp.MustCompile(`(?m)^20 messages relayed, 20 consumed by 3 workers \(\[\d+ \d+ \d+\]\), 0 delivered twice\n$`).MatchString(got) {
		t.Errorf("output does not end with the summary:\n%s", got)
	}
}

// deleteStream removes the test's JetStream stream (run leaves it to look at).
func deleteStream(url, name string) {
	nc, err := nats.Connect(url)
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, name)
}
