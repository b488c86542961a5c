package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// A checkpoint is a hash: the shared scope's at "checkpoint:<stream>" (a SingleLeader
// stream's one position), an instance's at "checkpoint:<stream>@<instance>" (stream and
// instance names never hold '@'). The set "checkpoints:<stream>" lists the instance names
// whose hash may exist ("" for the shared one), for ListCheckpoints.

func (s *Store) checkpointKey(scope store.Scope) string {
	if scope.Shared() {
		return s.key("checkpoint", scope.Stream)
	}
	return s.key("checkpoint", scope.Stream+"@"+scope.Instance)
}

func (s *Store) checkpointIndex(stream string) string { return s.key("checkpoints", stream) }

// saveScript replaces the checkpoint hash KEYS[1] with the field/value pairs ARGV[5..] unless
// its stored epoch is higher than ARGV[1]: then it returns {0, stored epoch} and changes
// nothing. A stored hash whose expiresAt (ms) is not after ARGV[3] (the store's now, ms) is
// expired: it counts as absent, its epoch fences nothing. ARGV[2] is the new expiry (ms, 0:
// none); the hash then also gets a Redis expiry ARGV[2] - ARGV[3] ms away, so that a checkpoint
// past its retention is deleted. ARGV[4] is added to the index set KEYS[2].
var saveScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'epoch', 'expiresAt')
local live = h[1] and not (h[2] and tonumber(h[2]) > 0 and tonumber(h[2]) <= tonumber(ARGV[3]))
if live and tonumber(h[1]) > tonumber(ARGV[1]) then return {0, h[1]} end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
local exp = tonumber(ARGV[2])
if exp > 0 then
  redis.call('PEXPIRE', KEYS[1], math.max(exp - tonumber(ARGV[3]), 1))
end
redis.call('SADD', KEYS[2], ARGV[4])
return {1, ''}
`)

// Save replaces the checkpoint of cp's scope with cp in one atomic script, unless the stored
// epoch is higher than cp.Epoch: then it fails with an error matching store.ErrFenced (naming
// the stored epoch) and changes nothing. A checkpoint with an ExpiresAt is deleted by Redis
// once Options.Now passes it (its key expires), and is absent from reads from then on.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var expires int64
	if !cp.ExpiresAt.IsZero() {
		expires = cp.ExpiresAt.UnixMilli()
	}
	args := []any{cp.Epoch, expires, s.now().UnixMilli(), cp.Instance,
		"stream", cp.Stream, "instance", cp.Instance,
		"epoch", cp.Epoch, "source", cp.Source, "owner", cp.Owner, "settled", strconv.FormatUint(cp.Settled, 10),
		"ctT", cp.ClusterTime.T, "ctI", cp.ClusterTime.I}
	if cp.Token != nil {
		args = append(args, "token", []byte(cp.Token))
	}
	if !cp.UpdatedAt.IsZero() {
		args = append(args, "updatedAt", cp.UpdatedAt.UnixMilli())
	}
	if expires != 0 {
		args = append(args, "expiresAt", expires)
	}
	scope := cp.Scope()
	v, err := saveScript.Run(ctx, s.rdb, []string{s.checkpointKey(scope), s.checkpointIndex(cp.Stream)}, args...).Result()
	if err != nil {
		return wrap(ctx, err, "save checkpoint of %q (epoch %d)", scope.String(), cp.Epoch)
	}
	if a, ok := v.([]any); ok && len(a) == 2 && toInt64(a[0]) == 0 {
		return fmt.Errorf("redisstore: save checkpoint of %q with epoch %d, stored epoch %s: %w",
			scope.String(), cp.Epoch, toString(a[1]), store.ErrFenced)
	}
	return nil
}

// Load returns scope's checkpoint; ok is false (err nil) if there is none or it has expired.
func (s *Store) Load(ctx context.Context, scope store.Scope) (store.Checkpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Checkpoint{}, false, err
	}
	h, err := s.rdb.HGetAll(ctx, s.checkpointKey(scope)).Result()
	if err != nil {
		return store.Checkpoint{}, false, wrap(ctx, err, "load checkpoint of %q", scope.String())
	}
	cp, ok := s.checkpointOf(scope, h)
	return cp, ok, nil
}

// ListCheckpoints returns the stream's unexpired checkpoints, every scope: the shared one first,
// then the instances' by name.
func (s *Store) ListCheckpoints(ctx context.Context, stream string) ([]store.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	members, err := s.rdb.SMembers(ctx, s.checkpointIndex(stream)).Result()
	if err != nil {
		return nil, wrap(ctx, err, "list checkpoints of stream %q", stream)
	}
	sort.Strings(members) // "" (the shared scope) first
	var out []store.Checkpoint
	for _, inst := range members {
		scope := store.Scope{Stream: stream, Instance: inst}
		h, err := s.rdb.HGetAll(ctx, s.checkpointKey(scope)).Result()
		if err != nil {
			return nil, wrap(ctx, err, "list checkpoints of stream %q", stream)
		}
		if len(h) == 0 { // deleted by its Redis expiry: forget it
			s.rdb.SRem(ctx, s.checkpointIndex(stream), inst)
			continue
		}
		if cp, ok := s.checkpointOf(scope, h); ok {
			out = append(out, cp)
		}
	}
	return out, nil
}

// checkpointOf decodes a checkpoint hash; ok is false for none or an expired one.
func (s *Store) checkpointOf(scope store.Scope, h map[string]string) (store.Checkpoint, bool) {
	if len(h) == 0 {
		return store.Checkpoint{}, false
	}
	cp := store.Checkpoint{Stream: scope.Stream, Instance: scope.Instance, Source: h["source"], Owner: h["owner"]}
	if e, ok := h["expiresAt"]; ok {
		n, _ := strconv.ParseInt(e, 10, 64)
		cp.ExpiresAt = time.UnixMilli(n).UTC()
		if !s.now().Before(cp.ExpiresAt) {
			return store.Checkpoint{}, false
		}
	}
	cp.Epoch, _ = strconv.ParseInt(h["epoch"], 10, 64)
	cp.Settled, _ = strconv.ParseUint(h["settled"], 10, 64)
	t, _ := strconv.ParseUint(h["ctT"], 10, 32)
	i, _ := strconv.ParseUint(h["ctI"], 10, 32)
	cp.ClusterTime = bson.Timestamp{T: uint32(t), I: uint32(i)}
	if tok, ok := h["token"]; ok {
		cp.Token = bson.Raw(tok)
	}
	if u, ok := h["updatedAt"]; ok {
		n, _ := strconv.ParseInt(u, 10, 64)
		cp.UpdatedAt = time.UnixMilli(n).UTC()
	}
	return cp, true
}
