package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/store"
)

// saveScript replaces the checkpoint hash KEYS[1] with the field/value pairs ARGV[2..] unless
// its stored epoch is higher than ARGV[1]: then it returns {0, stored epoch} and changes nothing.
var saveScript = redis.NewScript(`
local e = redis.call('HGET', KEYS[1], 'epoch')
if e and tonumber(e) > tonumber(ARGV[1]) then return {0, e} end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return {1, ''}
`)

// Save replaces the stream's checkpoint with cp in one atomic script, unless the stored epoch
// is higher than cp.Epoch: then it fails with an error matching store.ErrFenced (naming the
// stored epoch) and changes nothing.
func (s *Store) Save(ctx context.Context, cp store.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	args := []any{cp.Epoch,
		"epoch", cp.Epoch, "source", cp.Source, "owner", cp.Owner, "settled", strconv.FormatUint(cp.Settled, 10),
		"ctT", cp.ClusterTime.T, "ctI", cp.ClusterTime.I}
	if cp.Token != nil {
		args = append(args, "token", []byte(cp.Token))
	}
	if !cp.UpdatedAt.IsZero() {
		args = append(args, "updatedAt", cp.UpdatedAt.UnixMilli())
	}
	v, err := saveScript.Run(ctx, s.rdb, []string{s.key("checkpoint", cp.Stream)}, args...).Result()
	if err != nil {
		return wrap(ctx, err, "save checkpoint of stream %q (epoch %d)", cp.Stream, cp.Epoch)
	}
	if a, ok := v.([]any); ok && len(a) == 2 && toInt64(a[0]) == 0 {
		return fmt.Errorf("redisstore: save checkpoint of stream %q with epoch %d, stored epoch %s: %w",
			cp.Stream, cp.Epoch, toString(a[1]), store.ErrFenced)
	}
	return nil
}

// Load returns the stream's checkpoint; ok is false (err nil) if there is none.
func (s *Store) Load(ctx context.Context, stream string) (store.Checkpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Checkpoint{}, false, err
	}
	h, err := s.rdb.HGetAll(ctx, s.key("checkpoint", stream)).Result()
	if err != nil {
		return store.Checkpoint{}, false, wrap(ctx, err, "load checkpoint of stream %q", stream)
	}
	if len(h) == 0 {
		return store.Checkpoint{}, false, nil
	}
	cp := store.Checkpoint{Stream: stream, Source: h["source"], Owner: h["owner"]}
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
	return cp, true, nil
}
