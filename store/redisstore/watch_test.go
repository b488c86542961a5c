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
	"github.com/watchtree/watchtree/store/storetest"
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
	for i := range watches { // open while the channels are counted below
		s.WatchLease(ctx, fmt.Sprintf("held-%02d", i))
	}
	storetest.WatchEach(t, s, watches, 5*time.Second)
	chs, err := rdb.PubSubChannels(ctx, quoted+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 0 {
		t.Fatalf("%d per-lease channel subscriptions for %d open watches, want none (one pattern)", len(chs), watches)
	}
}
