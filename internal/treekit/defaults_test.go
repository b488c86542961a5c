package treekit

import (
	"testing"
	"time"
)

// TestFillZero: zero fields take the defaults' values, set fields keep theirs, and an
// unexported field is left alone (reflection cannot set it).
func TestFillZero(t *testing.T) {
	type cfg struct {
		Name    string
		Timeout time.Duration
		Codes   []int32
		hidden  int
	}
	c := cfg{Timeout: time.Second}
	FillZero(&c, cfg{Name: "d", Timeout: time.Minute, Codes: []int32{7}, hidden: 3})
	if c.Name != "d" || c.Timeout != time.Second || len(c.Codes) != 1 || c.Codes[0] != 7 || c.hidden != 0 {
		t.Errorf("FillZero = %+v, want Name d, Timeout 1s (kept), Codes [7], hidden 0", c)
	}
}
