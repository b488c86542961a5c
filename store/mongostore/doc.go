// Package mongostore implements watchtree's checkpoint, gap and dead-letter stores on MongoDB
// (driver go.mongodb.org/mongo-driver/v2). It passes the store/storetest contract suites.
//
// Collections (names configurable through Options). Every record belongs to a store.Scope: a
// stream and, for an AllInstances stream, an instance; the shared scope (no instance) keeps the
// layout of earlier versions, so their documents stay readable.
//
//   - _wt_checkpoints: one document per scope. An instance's own checkpoint is
//     {_id: {stream, instance}, stream, instance, token, clusterTime, source, epoch, owner,
//     settled, updatedAt, expiresAt}; the shared one (SingleLeader, earlier versions) is
//     {_id: stream, token, clusterTime, source, epoch, owner, settled, updatedAt}, without
//     stream, instance or expiresAt. A compound _id never equals a string one, so both layouts
//     live side by side and the key's uniqueness needs no index. token and clusterTime are left
//     out when unknown. Indexes: a TTL index on expiresAt (an instance's checkpoint not written
//     for its retention is deleted; the shared one never expires) and {stream: 1, instance: 1}
//     for listing (ListCheckpoints, which also reads the shared one by _id).
//   - _wt_dead_letters: one document per scope and event ID (streams that watch the same
//     collection, and the instances of one stream, each keep their own record of an event),
//     {_id: {stream, instance, id: event ID}, stream, instance, token, operationType,
//     documentKey, namespace, event, eventOmitted, error, errorType, stack, attempts,
//     firstAttemptAt, lastAttemptAt, createdAt, expiresAt, replayCount, lastReplayAt}; instance
//     is left out for the shared scope (as earlier versions wrote it), optional fields when
//     empty; event is left out (eventOmitted: true) when the record would exceed the 16 MiB
//     document limit. The key is the compound _id, so its uniqueness needs no index.
//     Indexes: a TTL index on expiresAt (expireAfterSeconds 0: the server deletes a document
//     once its expiresAt has passed; documents without expiresAt never expire) and
//     {stream: 1, instance: 1, createdAt: 1} for listing.
//   - _wt_gaps: one document per gap ID,
//     {_id, stream, instance, fromToken, fromTime, toToken, toTime, policy, reason, at}
//     (instance left out for the shared scope). Index {stream: 1, instance: 1, at: 1}.
//
// Fencing and monotonic positions: Save is one atomic conditional upsert, a replaceOne with
// upsert: true and the filter {_id: <the scope's _id>, $or: [no epoch, expired, {epoch: {$lt: E}},
// {epoch: E, <not behind>}]}, where <not behind> holds when the stored token's _data string is
// not after the new one's (or, where either has no token, the stored clusterTime is not after
// the new one's); a Rewind leaves it out. If the stored document refuses the save, the filter
// matches nothing, the upsert tries to insert a second document with the same _id and the
// server answers DuplicateKey (11000). A DuplicateKey can also come from a concurrent first save;
// so Save retries once, and a second DuplicateKey is a refusal: Save reads the stored document
// and reports store.ErrFenced (its epoch is higher) or store.ErrBackward (its position is ahead).
//
// Durability: writes use write concern majority (Options.WriteConcern) and reads go to the
// primary, so a save that reported success survives a failover. Retryable writes (the driver's
// default) make a write whose connection died mid-flight safe to retry; without them a write
// may be applied yet reported failed, which is harmless because every write is an idempotent
// upsert by _id (MarkReplayed excepted: its retry may count a replay twice).
//
// Expiry: the TTL monitor of a real server runs every 60 seconds, so an expired dead letter or
// checkpoint may linger for up to a minute. Reads therefore also filter on expiresAt with the
// store's clock (Options.Now): a record is absent from every read once Now() is after its
// expiresAt.
//
// Errors: a done context makes every method return an error matching ctx.Err() (checked before
// any I/O, and after a failed one). A server that is down or frozen makes a call fail when the
// context's deadline passes, or after the client's serverSelectionTimeout (30s by default) when
// the context has no deadline.
package mongostore
