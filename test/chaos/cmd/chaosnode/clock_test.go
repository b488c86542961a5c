package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The file steps the clock and sets its drift; unskew maps its readings back to the real time.
func TestSkewClockFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.clock")
	c := newSkewClock(path, nil)
	if d := c.Now().Sub(time.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("no file: skew %v, want about 0", d)
	}
	for _, tc := range []struct {
		raw    string
		offset time.Duration
	}{{"-7s 0", -7 * time.Second}, {"9s 0", 9 * time.Second}, {"3s 0.5", 3 * time.Second}, {"", 0}} {
		if err := os.WriteFile(path, []byte(tc.raw), 0o644); err != nil {
			t.Fatal(err)
		}
		c.reload()
		real := time.Now()
		got := c.Now()
		if d := got.Sub(real) - tc.offset; d < -time.Second || d > time.Second {
			t.Fatalf("%q: skew %v, want about %v", tc.raw, got.Sub(real), tc.offset)
		}
		if d := c.unskew(got).Sub(real); d < -time.Second || d > time.Second {
			t.Fatalf("%q: unskew off by %v", tc.raw, d)
		}
	}
	for _, bad := range []string{"7s", "x 0", "1s -2"} {
		if _, _, err := parseSkew(bad); err == nil {
			t.Errorf("parseSkew(%q) = nil error", bad)
		}
	}
}
