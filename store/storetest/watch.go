package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/watchtree/watchtree/store"
)

// WatchEach opens n watches of leases named watch-00, watch-01, … on s, then acquires and
// releases each lease (each call bounded by callTimeout) until every watch was notified, and
// checks that every channel closes once the watches' context ends. It fails t when a lease call
// fails, when a watch is not notified within 20 rounds, or when a channel stays open: a store
// whose watches hold a connection each fails it on a client with fewer connections than n.
func WatchEach(t *testing.T, s store.LeaseStore, n int, callTimeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := func(i int) string { return fmt.Sprintf("watch-%02d", i) }
	chans := make([]<-chan struct{}, n)
	for i := range chans {
		chans[i] = s.WatchLease(ctx, name(i))
	}
	notified, left := make([]bool, n), n
	for round := 0; left > 0; round++ {
		if round == 20 {
			t.Fatalf("%d of %d watches not notified after 20 rounds of acquisitions", left, n)
		}
		for i := range chans {
			if notified[i] {
				continue
			}
			cctx, ccancel := context.WithTimeout(context.Background(), callTimeout)
			l, err := s.Acquire(cctx, name(i), "owner", longTTL)
			if err == nil {
				err = s.Release(cctx, name(i), "owner", l.Epoch)
			}
			ccancel()
			if err != nil {
				t.Fatalf("lease call %d of round %d with %d watches open: %v", i, round, n, err)
			}
		}
		deadline := time.After(2 * time.Second)
	wait:
		for i := range chans {
			for !notified[i] {
				select {
				case _, ok := <-chans[i]:
					if !ok {
						t.Fatalf("watch %d closed while its context is live", i)
					}
					notified[i] = true
					left--
				case <-deadline:
					break wait
				}
			}
		}
	}
	cancel()
	for i, ch := range chans {
		for open := true; open; {
			select {
			case _, open = <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("watch %d not closed after its context ended", i)
			}
		}
	}
}

func leaseManyWatches(t *testing.T, s store.LeaseStore) { WatchEach(t, s, 20, 5*time.Second) }
