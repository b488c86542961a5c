package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/test/mongosim"
)

// Many lease watches on a client with a small pool: the watches share one change stream, so
// they leave the pool to the lease calls (a watch per lease would hold a connection each in a
// getMore, and with more watches than connections every Acquire would wait for the pool), and
// each watch still hears of a change of its lease.
func TestLeaseWatchesShareOneChangeStream(t *testing.T) {
	const pool, watches = 4, 24
	e := newEnv(t, mongosim.Options{}, func(o *options.ClientOptions) { o.SetMaxPoolSize(pool) })
	s, _ := e.newStore(t, mongostore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	chans := make([]<-chan struct{}, watches)
	for i := range chans {
		chans[i] = s.WatchLease(ctx, fmt.Sprintf("lease-%02d", i))
	}
	// Acquire the leases one by one, each within a second (a pool held by getMores of up to a
	// second each would queue every call behind them), until each watch was notified once.
	notified := make([]bool, watches)
	for round := 0; ; round++ {
		if round == 20 {
			t.Fatalf("watches notified after 20 rounds of acquisitions: %v", notified)
		}
		for i := range chans {
			if notified[i] {
				continue
			}
			actx, acancel := context.WithTimeout(context.Background(), time.Second)
			l, err := s.Acquire(actx, fmt.Sprintf("lease-%02d", i), "owner", 10*time.Second)
			if err == nil {
				err = s.Release(actx, l.Name, "owner", l.Epoch)
			}
			acancel()
			if err != nil {
				t.Fatalf("lease call %d of round %d with %d watches open on a pool of %d: %v", i, round, watches, pool, err)
			}
		}
		deadline := time.After(2 * time.Second)
	wait:
		for i := range chans {
			for !notified[i] {
				select {
				case _, ok := <-chans[i]:
					if !ok {
						t.Fatalf("watch %d closed while ctx is live", i)
					}
					notified[i] = true
				case <-deadline:
					break wait
				}
			}
		}
		all := true
		for _, n := range notified {
			all = all && n
		}
		if all {
			break
		}
	}
	cancel()
	for i, ch := range chans {
		select {
		case _, ok := <-ch:
			for ok {
				_, ok = <-ch
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch %d not closed after its ctx ended", i)
		}
	}
}
