package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/redisstore"
	"github.com/watchtree/watchtree/store/storetest"
)

// addrEnv overrides the Redis server the tests use (default 127.0.0.1:6379).
const addrEnv = "WATCHTREE_REDIS_ADDR"

// newStore returns a store on the real Redis with a key prefix unique to this call, whose keys
// are deleted when t ends. A Redis that does not answer fails the test: the contract is only
// shown against a real server.
func newStore(t *testing.T) *redisstore.Store { return newStoreAt(t, nil) }

// newStoreAt is newStore with now as the store's clock (nil: time.Now).
func newStoreAt(t *testing.T, now func() time.Time) *redisstore.Store {
	t.Helper()
	addr := os.Getenv(addrEnv)
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("Redis at %s does not answer (%v); start it or set %s", addr, err, addrEnv)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "wt-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		_ = rdb.Close()
	})
	s, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix, Now: now})
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	return s
}

func TestLeaseContract(t *testing.T) {
	storetest.TestLeaseStore(t, func(t *testing.T) store.LeaseStore { return newStore(t) })
}

func TestCheckpointContract(t *testing.T) {
	storetest.TestCheckpointStore(t, func(t *testing.T, now func() time.Time) store.CheckpointStore { return newStoreAt(t, now) })
}
