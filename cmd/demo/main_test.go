package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDemoEmbeddedChargesEveryOrderOnce runs the demo small: every order is charged once or
// dead-lettered (the poison ones), nothing is lost, and the summary says so.
func TestDemoEmbeddedChargesEveryOrderOnce(t *testing.T) {
	var out bytes.Buffer
	cfg := config{db: "shop", orders: 400, poisonEvery: 50, lanes: 4, rate: 2000,
		timeout: 50 * time.Second, progress: 50 * time.Millisecond}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		`started the embedded mongosim`,
		`written\s+\d+ orders, charged\s+\d+`, // a progress line
		`crash: runtime stopped after \d+ charges \(cut short`,
		`restart: a new runtime resumes the stream from its checkpoint`,
		`written\s+400\s`,
		`charged\s+392\s+orders with a payment, 0 of them charged twice`,
		`dead letters\s+8\s`,
		`lost\s+0\s`,
		`replays absorbed\s+\d+\s`,
		`events/s\s+\d+\s`,
		`first dead letter \(rt.DeadLetters\): order \d+, 3 attempts, error "order \d+: card declined"`,
	} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// Every handler call is accounted for.
	m := regexp.MustCompile(`handled\s+(\d+)\s+handler calls: (\d+) charges, (\d+) replays, (\d+) declined attempts, (\d+) failed`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no handled row:\n%s", s)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	if n(1) != n(2)+n(3)+n(4)+n(5) || n(4) < 8*3 {
		t.Errorf("handled %d = %d charges + %d replays + %d declined + %d failed: want the sum, and 3 declined attempts per poison order", n(1), n(2), n(3), n(4), n(5))
	}
	t.Logf("demo output:\n%s", s)
}

func TestDemoRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), config{orders: 0, lanes: 1, progress: time.Second}, &bytes.Buffer{}); err == nil {
		t.Fatal("want an error for --orders 0")
	}
}
