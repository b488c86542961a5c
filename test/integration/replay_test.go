package integration_test

import (
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCursorKillsWhileWritingReplayNothing: getMores fail for a while (alwaysOn, CursorNotFound
// or a closed connection) again and again while writes flow. Each is resumed by the driver from
// the last event it returned, inside one cursor incarnation: no event may be delivered twice
// unless the stream restarted.
func TestCursorKillsWhileWritingReplayNothing(t *testing.T) {
	e := newEnv(t)
	r := e.startRuntime(nil)
	got := newHandled()
	faultStream(t, r, "gm-storm", got, fastRestart)
	const n = 400
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(1); i <= n; i += 4 {
			e.insertOrders("orders", i, i+3)
		}
	}()
	for round := range 8 {
		data := bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "appName", Value: r.app}}
		if round%2 == 0 {
			data = append(data, bson.E{Key: "errorCode", Value: 43})
		} else {
			data = append(data, bson.E{Key: "closeConnection", Value: true})
		}
		e.failPoint("alwaysOn", data)
		time.Sleep(150 * time.Millisecond) // how long the fault stands, not a wait for an outcome
		e.failPointOff()
		time.Sleep(100 * time.Millisecond) // the pause between two faults
	}
	wg.Wait()
	waitOrders(t, got, n)
	restarts := restartsOf(r, "gm-storm")
	got.mu.Lock()
	defer got.mu.Unlock()
	var twice []string
	for id, c := range got.byID {
		if c > 1 {
			twice = append(twice, id)
		}
	}
	t.Logf("restarts %d, deliveries %d, distinct %d", len(restarts), len(got.order), len(got.byID))
	if len(restarts) == 0 && len(twice) > 0 {
		t.Fatalf("%d events delivered twice without a restart, e.g. %v; order %v", len(twice), twice[:min(3, len(twice))], got.order)
	}
}
