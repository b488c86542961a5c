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

// saveScript replaces the checkpoint hash KEYS[1] with the field/value pairs ARGV[9..] unless
// the stored record refuses it: its epoch is higher than ARGV[1] (it returns {0, stored epoch}),
// or its epoch is equal, ARGV[5] is not "1" (a Rewind) and the new position sorts before the
// stored one (it returns {2, stored data, stored ctT, stored ctI}); then it changes nothing.
// Positions compare as store.ComparePositions orders them: by the tokens' _data strings
// (ARGV[6] and the stored field "data", compared byte by byte: Lua's own < follows the
// server's locale) when both have one, else by cluster time (ARGV[7], ARGV[8] and the stored
// ctT, ctI) when both know one. A stored hash whose expiresAt (ms) is not after ARGV[3] (the
// store's now, ms) is expired: it counts as absent and refuses nothing. ARGV[2] is the new
// expiry (ms, 0: none); the hash then also gets a Redis expiry ARGV[2] - ARGV[3] ms away, so
// that a checkpoint past its retention is deleted. ARGV[4] is added to the index set KEYS[2].
var saveScript = redis.NewScript(`
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local h = redis.call('HMGET', KEYS[1], 'epoch', 'expiresAt', 'data', 'ctT', 'ctI')
local live = h[1] and not (h[2] and tonumber(h[2]) > 0 and tonumber(h[2]) <= tonumber(ARGV[3]))
if live then
  local stored, new = tonumber(h[1]), tonumber(ARGV[1])
  if stored > new then return {0, h[1]} end
  if stored == new and ARGV[5] ~= '1' then
    local sd, st, si = h[3] or '', tonumber(h[4] or '0'), tonumber(h[5] or '0')
    local nt, ni = tonumber(ARGV[7]), tonumber(ARGV[8])
    local behind = false
    if ARGV[6] ~= '' and sd ~= '' then
      behind = before(ARGV[6], sd)
    elseif (nt ~= 0 or ni ~= 0) and (st ~= 0 or si ~= 0) then
      behind = nt < st or (nt == st and ni < si)
    end
    if behind then return {2, sd, tostring(st), tostring(si)} end
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 9))
local exp = tonumber(ARGV[2])
if exp > 0 then
  redis.call('PEXPIRE', KEYS[1], math.max(exp - tonumber(ARGV[3]), 1))
end
redis.call('SADD', KEYS[2], ARGV[4])
return {1, ''}
`)

// Save replaces the checkpoint of cp's scope with cp in one atomic script, unless the stored
// epoch is higher than cp.Epoch (an error matching store.ErrFenced, naming the stored epoch)
// or, under the same epoch, cp is not a Rewind and its position sorts before the stored one
// (an error matching store.ErrBackward, naming both positions); then it changes nothing. A
// checkpoint with an ExpiresAt is deleted by Redis once Options.Now passes it (its key
// expires), and is absent from reads from then on.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var expires int64
	if !cp.ExpiresAt.IsZero() {
		expires = cp.ExpiresAt.UnixMilli()
	}
	rewind := "0"
	if cp.Rewind {
		rewind = "1"
	}
	var data string
	if len(cp.Token) > 0 {
		data, _ = cp.Token.Lookup("_data").StringValueOK()
	}
	args := []any{cp.Epoch, expires, s.now().UnixMilli(), cp.Instance, rewind, data, cp.ClusterTime.T, cp.ClusterTime.I,
		"stream", cp.Stream, "instance", cp.Instance,
		"epoch", cp.Epoch, "source", cp.Source, "owner", cp.Owner, "settled", strconv.FormatUint(cp.Settled, 10),
		"ctT", cp.ClusterTime.T, "ctI", cp.ClusterTime.I}
	if cp.Token != nil {
		args = append(args, "token", []byte(cp.Token))
	}
	if data != "" {
		// The token's _data as a string, for the script's comparison (it cannot read BSON).
		args = append(args, "data", data)
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
	a, _ := v.([]any)
	switch {
	case len(a) == 2 && toInt64(a[0]) == 0:
		return fmt.Errorf("redisstore: save checkpoint of %q with epoch %d, stored epoch %s: %w",
			scope.String(), cp.Epoch, toString(a[1]), store.ErrFenced)
	case len(a) == 4 && toInt64(a[0]) == 2:
		stored := store.Checkpoint{}
		if d := toString(a[1]); d != "" {
			stored.Token, _ = bson.Marshal(bson.D{{Key: "_data", Value: d}})
		}
		t, _ := strconv.ParseUint(toString(a[2]), 10, 32)
		i, _ := strconv.ParseUint(toString(a[3]), 10, 32)
		stored.ClusterTime = bson.Timestamp{T: uint32(t), I: uint32(i)}
		return fmt.Errorf("redisstore: save checkpoint of %q at %s, behind the stored %s (epoch %d): %w",
			scope.String(), store.DescribePosition(cp), store.DescribePosition(stored), cp.Epoch, store.ErrBackward)
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
