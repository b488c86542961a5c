// Package redisstore implements watchtree's SingleLeader lease store and checkpoint store on
// Redis, through github.com/redis/go-redis/v9. It passes the store/storetest lease and
// checkpoint contract suites against a real Redis server.
//
// Keys, all under Options.Prefix (default "watchtree:"):
//
//   - lease:<stream>: a hash {owner, epoch, acquiredAt, expiresAt} (times in Unix milliseconds of
//     the Redis server's clock) whose key TTL is the lease's: Redis judges expiry, and an expired
//     lease is simply gone. A release deletes it.
//   - epoch:<stream>: the stream's epoch counter. Every acquisition INCRs it, and it never
//     expires, so epochs only grow across expiries and releases.
//   - lease-events:<stream>: the pub/sub channel on which every acquisition and release is
//     published; the WatchLease calls of a Store share one PSUBSCRIBE to lease-events:*. An
//     expiry publishes nothing (keyspace notifications are a server setting this package does
//     not change): the leader actor retries exactly when the lease it saw expires, by the
//     Remaining the server reported.
//   - instances: a sorted set of instance heartbeats scored by their expiry (server milliseconds).
//   - checkpoint:<stream>: a hash {token, ctT, ctI, source, epoch, owner, settled, updatedAt}.
//
// Atomicity: every mutation is one Lua script, run atomically by the server, with its time
// taken from the server's TIME. Acquire takes the lease only when the key is missing or is
// already the owner's; Renew and Release only when owner and epoch match; a checkpoint Save
// only when the stored epoch is not higher (else store.ErrFenced, nothing changed).
//
// Durability is Redis's: with persistence off, a restart of the server forgets every lease
// (every instance then campaigns again, with epochs from a fresh counter) and every checkpoint.
// Use AOF persistence for checkpoints you cannot lose.
package redisstore
