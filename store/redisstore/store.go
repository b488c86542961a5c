package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/watchtree/watchtree/store"
	"github.com/watchtree/watchtree/store/leasewatch"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "watchtree:"

// Options configures a Store. The zero value is the documented default for every field.
type Options struct {
	// Prefix is put before every key and channel name, so that several deployments (or tests)
	// can share one Redis. Default "watchtree:".
	Prefix string
	// Now is the clock that judges a checkpoint's ExpiresAt (leases are judged by the Redis
	// server's own clock). Default time.Now.
	Now func() time.Time
}

// Store implements the checkpoint and lease stores of package store.
var (
	_ store.CheckpointStore = (*Store)(nil)
	_ store.LeaseStore      = (*Store)(nil)
)

// Store is the Redis lease and checkpoint store. It is safe for concurrent use and holds no
// state besides the client; the client is the caller's to close.
type Store struct {
	rdb     redis.UniversalClient
	prefix  string
	now     func() time.Time
	watches leasewatch.Hub // WatchLease's watches, over one subscription (leaseFeed)
}

// New returns a Store on rdb. It does no I/O.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: New: nil client")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{rdb: rdb, prefix: opts.Prefix, now: opts.Now}, nil
}

func (s *Store) key(kind, name string) string { return s.prefix + kind + ":" + name }

// wrap describes a failed operation; if ctx is done the result matches ctx.Err().
func wrap(ctx context.Context, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("redisstore: %s: %w (%v)", msg, cerr, err)
	}
	return fmt.Errorf("redisstore: %s: %w", msg, err)
}

// ms converts a server time in Unix milliseconds.
func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// toInt64 reads an integer reply element (Lua numbers arrive as int64, strings as string).
func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
