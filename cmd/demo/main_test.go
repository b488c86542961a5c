package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemoEmbeddedChargesEveryOrderOnce(t *testing.T) {
	var out bytes.Buffer
	cfg := config{db: "shop", orders: 400, updateEvery: 3, checkpointEvery: 20, timeout: 60 * time.Second}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		`started the embedded mongosim`,
		`KillAllConnections`,
		`written\s+533\s`,
		`lost\s+0\s`,
		`charged\s+400\s+0 orders charged twice`,
		`resumed\s+2\s+1 by the driver`,
		`duplicates absorbed\s+[1-9]`,
	} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), config{orders: 0, checkpointEvery: 1}, &bytes.Buffer{}); err == nil {
		t.Fatal("want an error for --orders 0")
	}
}
