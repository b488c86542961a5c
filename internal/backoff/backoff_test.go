package backoff

import (
	"math"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	cases := []struct {
		initial, max time.Duration
		mult         float64
		attempt      int
		want         time.Duration
	}{
		{time.Second, time.Minute, 2, 0, time.Second},
		{time.Second, time.Minute, 2, 1, time.Second},
		{time.Second, time.Minute, 2, 2, 2 * time.Second},
		{time.Second, time.Minute, 2, 6, 32 * time.Second},
		{time.Second, time.Minute, 2, 7, time.Minute},
		{time.Second, time.Minute, 2, 1 << 30, time.Minute},
		{500 * time.Millisecond, 30 * time.Second, 1, 9, 500 * time.Millisecond},
		{time.Second, time.Minute, math.Inf(1), 3, time.Minute},
	}
	for _, c := range cases {
		if got := Delay(c.initial, c.max, c.mult, c.attempt); got != c.want {
			t.Errorf("Delay(%v, %v, %v, %d) = %v, want %v", c.initial, c.max, c.mult, c.attempt, got, c.want)
		}
	}
}

func TestJitter(t *testing.T) {
	cases := []struct {
		d    time.Duration
		r    float64
		want time.Duration
	}{
		{10 * time.Second, 0, 8 * time.Second},
		{10 * time.Second, 0.5, 10 * time.Second},
		{10 * time.Second, 1, 12 * time.Second},
		{10 * time.Second, -3, 8 * time.Second},
		{10 * time.Second, 7, 12 * time.Second},
		{10 * time.Second, math.NaN(), 8 * time.Second},
		{time.Microsecond, 0, MinJittered},
		{time.Duration(math.MaxInt64), 1, time.Duration(math.MaxInt64)},
	}
	for _, c := range cases {
		if got := Jitter(c.d, c.r); got != c.want {
			t.Errorf("Jitter(%v, %v) = %v, want %v", c.d, c.r, got, c.want)
		}
	}
}
