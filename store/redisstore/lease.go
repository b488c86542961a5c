package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/watchtree/watchtree/store"
)

// The lease scripts. KEYS[1] lease hash, KEYS[2] epoch counter, KEYS[3] events channel. Each
// returns {code, owner, epoch, acquiredAt, expiresAt, now} with times in server milliseconds;
// code 1 = done, 0 = refused (the current holder follows, owner "" when there is none).
const serverNow = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

const currentLease = `local function current(code)
  local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch', 'acquiredAt', 'expiresAt')
  return {code, v[1] or '', tonumber(v[2] or '0'), tonumber(v[3] or '0'), tonumber(v[4] or '0'), now}
end
`

// A lease is held while its key exists and its expiresAt is after the server's now: the key's
// TTL removes it at that time, and the field makes the judgement exact to the millisecond (a
// key whose TTL runs out during a script still exists for that script).
var acquireScript = redis.NewScript(serverNow + currentLease + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'expiresAt')
if v[1] and v[1] ~= ARGV[1] and tonumber(v[2] or '0') > now then return current(0) end
local epoch = redis.call('INCR', KEYS[2])
local ttl = tonumber(ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'epoch', epoch, 'acquiredAt', now, 'expiresAt', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PUBLISH', KEYS[3], 'acquired')
return {1, ARGV[1], epoch, now, now + ttl, now}
`)

var renewScript = redis.NewScript(serverNow + currentLease + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch', 'expiresAt')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] or tonumber(v[3] or '0') <= now then return current(0) end
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'expiresAt', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return current(1)
`)

var releaseScript = redis.NewScript(serverNow + currentLease + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return current(0) end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[3], 'released')
return {1, '', tonumber(ARGV[2]), 0, now, now}
`)

// getScript: KEYS[1] lease hash, KEYS[2] epoch counter. A missing lease with a counter reports
// the counter's epoch and no owner; code 0 = no record at all.
var getScript = redis.NewScript(serverNow + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch', 'acquiredAt', 'expiresAt')
if v[1] then return {1, v[1], tonumber(v[2]), tonumber(v[3]), tonumber(v[4]), now} end
local e = redis.call('GET', KEYS[2])
if e then return {1, '', tonumber(e), 0, 0, now} end
return {0, '', 0, 0, 0, now}
`)

func (s *Store) leaseKeys(name string) []string {
	return []string{s.key("lease", name), s.key("epoch", name), s.key("lease-events", name)}
}

// parseLease decodes a script's reply.
func parseLease(name string, v any) (done bool, l store.Lease, err error) {
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return false, l, fmt.Errorf("unexpected script reply %v", v)
	}
	l = store.Lease{Name: name, Owner: toString(a[1]), Epoch: toInt64(a[2]), ServerNow: ms(toInt64(a[5]))}
	if at := toInt64(a[3]); at > 0 {
		l.AcquiredAt = ms(at)
	}
	if exp := toInt64(a[4]); exp > 0 {
		l.ExpiresAt = ms(exp)
	}
	if rem := l.ExpiresAt.Sub(l.ServerNow); l.Owner != "" && rem > 0 {
		l.Remaining = rem
	}
	return toInt64(a[0]) == 1, l, nil
}

// Acquire takes the lease of name for owner for ttl when no unexpired lease of another owner
// exists (Redis's key TTL judges expiry), with the next value of the stream's epoch counter.
// Otherwise it returns the holder's lease and an error matching store.ErrLeaseHeld.
func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	if owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("redisstore: acquire lease %q: owner must not be empty and ttl must be positive (owner %q, ttl %v)", name, owner, ttl)
	}
	v, err := acquireScript.Run(ctx, s.rdb, s.leaseKeys(name), owner, ttl.Milliseconds()).Result()
	if err != nil {
		return store.Lease{}, wrap(ctx, err, "acquire lease %q for %q", name, owner)
	}
	done, l, err := parseLease(name, v)
	if err != nil {
		return store.Lease{}, wrap(ctx, err, "acquire lease %q for %q", name, owner)
	}
	if !done {
		return l, fmt.Errorf("redisstore: acquire lease %q for %q: held by %q (epoch %d, %v left): %w",
			name, owner, l.Owner, l.Epoch, l.Remaining, store.ErrLeaseHeld)
	}
	return l, nil
}

// Renew extends owner's lease of name under epoch to server now + ttl; store.ErrLeaseLost,
// changing nothing, unless owner holds it unexpired under that epoch.
func (s *Store) Renew(ctx context.Context, name, owner string, epoch int64, ttl time.Duration) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	v, err := renewScript.Run(ctx, s.rdb, s.leaseKeys(name), owner, epoch, ttl.Milliseconds()).Result()
	if err != nil {
		return store.Lease{}, wrap(ctx, err, "renew lease %q for %q (epoch %d)", name, owner, epoch)
	}
	done, l, err := parseLease(name, v)
	if err != nil {
		return store.Lease{}, wrap(ctx, err, "renew lease %q for %q (epoch %d)", name, owner, epoch)
	}
	if !done {
		return store.Lease{}, lostError("renew", name, owner, epoch, l)
	}
	return l, nil
}

// Release deletes owner's lease of name under epoch (the epoch counter stays) and publishes
// the release; store.ErrLeaseLost, changing nothing, when owner does not hold that epoch.
func (s *Store) Release(ctx context.Context, name, owner string, epoch int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := releaseScript.Run(ctx, s.rdb, s.leaseKeys(name), owner, epoch).Result()
	if err != nil {
		return wrap(ctx, err, "release lease %q of %q (epoch %d)", name, owner, epoch)
	}
	done, l, err := parseLease(name, v)
	if err != nil {
		return wrap(ctx, err, "release lease %q of %q (epoch %d)", name, owner, epoch)
	}
	if !done {
		return lostError("release", name, owner, epoch, l)
	}
	return nil
}

func lostError(verb, name, owner string, epoch int64, cur store.Lease) error {
	if cur.Owner == "" {
		return fmt.Errorf("redisstore: %s lease %q of %q (epoch %d): no holder: %w", verb, name, owner, epoch, store.ErrLeaseLost)
	}
	return fmt.Errorf("redisstore: %s lease %q of %q (epoch %d): now owner %q, epoch %d, %v left: %w",
		verb, name, owner, epoch, cur.Owner, cur.Epoch, cur.Remaining, store.ErrLeaseLost)
}

// GetLease reads the lease of name with the server's time. A lease that expired or was
// released reports no owner and the latest epoch; ok is false when the stream never had one.
func (s *Store) GetLease(ctx context.Context, name string) (store.Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, false, err
	}
	keys := s.leaseKeys(name)
	v, err := getScript.Run(ctx, s.rdb, keys[:2]).Result()
	if err != nil {
		return store.Lease{}, false, wrap(ctx, err, "read lease %q", name)
	}
	found, l, err := parseLease(name, v)
	if err != nil {
		return store.Lease{}, false, wrap(ctx, err, "read lease %q", name)
	}
	if !found {
		return store.Lease{}, false, nil
	}
	return l, true, nil
}

// WatchLease returns a channel that receives a value (changes coalesce) on every acquisition
// and release of name's lease, closed when ctx ends. Expiries are not published (see the
// package doc). All the watches of one Store share one pattern subscription to the
// lease-events channels (leaseFeed), so a runtime holds one pub/sub connection, not one per
// SingleLeader stream.
func (s *Store) WatchLease(ctx context.Context, name string) <-chan struct{} {
	return s.watches.Watch(ctx, name, s.leaseFeed)
}

// leaseFeed is WatchLease's leasewatch.Feed: one pattern subscription to the lease-events
// channels.
func (s *Store) leaseFeed(ctx context.Context, opened func()) {
	prefix := s.key("lease-events", "")
	sub := s.rdb.PSubscribe(ctx, globEscape(prefix)+"*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		return
	}
	opened()
	msgs := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			s.watches.Notify(strings.TrimPrefix(m.Channel, prefix))
		}
	}
}

// globEscape quotes the characters PSUBSCRIBE reads as a pattern, so that a Prefix holding one
// matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

var heartbeatScript = redis.NewScript(serverNow + `
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return now
`)

var instancesScript = redis.NewScript(serverNow + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
`)

// Heartbeat records instance id as alive until server now + ttl.
func (s *Store) Heartbeat(ctx context.Context, id string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := heartbeatScript.Run(ctx, s.rdb, []string{s.prefix + "instances"}, id, ttl.Milliseconds()).Err(); err != nil {
		return wrap(ctx, err, "heartbeat of instance %q", id)
	}
	return nil
}

// Instances lists the instances whose heartbeat has not expired (server clock), by ID; expired
// ones are removed on the way.
func (s *Store) Instances(ctx context.Context) ([]store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := instancesScript.Run(ctx, s.rdb, []string{s.prefix + "instances"}).Result()
	if err != nil {
		return nil, wrap(ctx, err, "list instances")
	}
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		return nil, wrap(ctx, errors.New("unexpected reply"), "list instances")
	}
	out := make([]store.Instance, 0, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		out = append(out, store.Instance{ID: toString(a[i]), ExpiresAt: ms(toInt64(a[i+1]))})
	}
	slices.SortFunc(out, func(x, y store.Instance) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Leave removes instance id's heartbeat at once.
func (s *Store) Leave(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.rdb.ZRem(ctx, s.prefix+"instances", id).Err(); err != nil {
		return wrap(ctx, err, "remove instance %q", id)
	}
	return nil
}
