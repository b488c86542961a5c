package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/watchtree/watchtree/store/redisstore"
)

// The lease watches of one Store share one pattern subscription: every watch hears of its
// lease, and no per-lease channel subscription (a connection each) is made. The prefix holds
// the glob characters PSUBSCRIBE would read as a pattern.
func TestLeaseWatchesShareOneSubscription(t *testing.T) {
	addr := os.Getenv(addrEnv)
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() }) // registered first: runs last
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "wt-test:[g*?]:" + hex.EncodeToString(b[:]) + ":"
	quoted := strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(prefix)
	t.Cleanup(func() { // the epoch counters stay after the releases
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for iter := rdb.Scan(ctx, 0, quoted+"*", 1000).Iterator(); iter.Next(ctx); {
			rdb.Del(ctx, iter.Val())
		}
	})
	s, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	const watches = 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chans := make([]<-chan struct{}, watches)
	for i := range chans {
		chans[i] = s.WatchLease(ctx, fmt.Sprintf("w%02d", i))
	}
	notified := make([]bool, watches)
	for round := 0; ; round++ {
		if round == 20 {
			t.Fatalf("watches notified after 20 rounds of acquisitions: %v", notified)
		}
		for i := range chans {
			if notified[i] {
				continue
			}
			l, err := s.Acquire(ctx, fmt.Sprintf("w%02d", i), "owner", 10*time.Second)
			if err == nil {
				err = s.Release(ctx, l.Name, "owner", l.Epoch)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.After(500 * time.Millisecond)
	wait:
		for i := range chans {
			for !notified[i] {
				select {
				case <-chans[i]:
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
	chs, err := rdb.PubSubChannels(ctx, quoted+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 0 {
		t.Fatalf("%d per-lease channel subscriptions for %d watches, want none (one pattern)", len(chs), watches)
	}
}
