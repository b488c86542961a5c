package chaos

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoak runs the chaos soak for 60 seconds (CHAOS_SECONDS overrides it) with a fixed seed
// (CHAOS_SEED overrides it), every fault kind in the draw (CHAOS_FAULTS, as make chaos reads it), and fails on any violation, printing
// the report with the seed that reproduces it. Skipped with -short: it takes about two minutes.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos soak takes about two minutes")
	}
	opts := Options{Seed: 20261203, Duration: 60 * time.Second}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		opts.Seed = seed
	}
	if v := os.Getenv("CHAOS_SECONDS"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s <= 0 {
			t.Fatalf("CHAOS_SECONDS=%q: want a positive number of seconds", v)
		}
		opts.Duration = time.Duration(s) * time.Second
	}
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		opts.Faults = strings.Split(v, ",")
		if err := CheckFaults(opts.Faults); err != nil {
			t.Fatalf("CHAOS_FAULTS: %v", err)
		}
	}
	opts.Network = os.Getenv("CHAOS_NETWORK")
	var progress bytes.Buffer
	opts.Log = &progress
	ctx, cancel := context.WithTimeout(context.Background(), opts.Duration+6*time.Minute)
	defer cancel()
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatalf("soak did not run: %v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Log("\n" + out.String())
	if rep.Failed() {
		t.Errorf("chaos soak found violations; rerun with CHAOS_SEED=%d (histories kept in %s)\n%s", rep.Seed, rep.Dir, progress.String())
	}
}
