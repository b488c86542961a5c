package treekit

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestPoolNeverWaitsForABusyGoroutine checks that Go and Schedule run new work at once even
// while every goroutine of the pool is blocked: an actor that blocks must not stall another.
func TestPoolNeverWaitsForABusyGoroutine(t *testing.T) {
	release := make(chan struct{})
	var blocked sync.WaitGroup
	for range 4 {
		blocked.Add(1)
		Go(func() {
			blocked.Done()
			<-release
		})
	}
	blocked.Wait()
	ran := make(chan struct{})
	goroutines.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("work scheduled while the pool's goroutines were blocked did not run")
	}
	close(release)
	waitForNoPoolGoroutines(t)
}

// TestPoolReusesAGoroutine checks that work arriving while a goroutine of the pool waits runs
// on that goroutine (its stack already grown) rather than on a new one.
func TestPoolReusesAGoroutine(t *testing.T) {
	ids := make(chan uint64, 2)
	done := make(chan struct{})
	Go(func() { ids <- goroutineID(); close(done) })
	<-done
	// The first goroutine is now waiting for work (for workerLinger); wait until it parks.
	deadline := time.Now().Add(5 * time.Second)
	for poolGoroutines() == 0 || !parked() {
		if time.Now().After(deadline) {
			t.Fatal("the pool's goroutine never waited for more work")
		}
		runtime.Gosched()
	}
	Go(func() { ids <- goroutineID() })
	first, second := <-ids, <-ids
	if first != second {
		t.Errorf("second work ran on goroutine %d, want the waiting goroutine %d", second, first)
	}
	waitForNoPoolGoroutines(t)
}

// parked reports whether a goroutine of the pool waits in worker's select.
func parked() bool {
	buf := make([]byte, 1<<20)
	s := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(s, "\n\n") {
		if strings.Contains(g, "treekit.(*pool).worker") && strings.Contains(g, "[select") {
			return true
		}
	}
	return false
}

func poolGoroutines() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "treekit.(*pool).worker(")
}

func goroutineID() uint64 {
	buf := make([]byte, 64)
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf, false)]), "goroutine ")
	var id uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// waitForNoPoolGoroutines checks that the pool keeps no goroutine once it has been idle for
// workerLinger: an idle process holds none.
func waitForNoPoolGoroutines(t *testing.T) {
	t.Helper()
	if err := goleak.Find(); err != nil {
		t.Errorf("the pool's goroutines did not end after workerLinger: %v", err)
	}
}
