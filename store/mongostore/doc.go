// Package mongostore implements watchtree's checkpoint, gap and dead-letter stores on MongoDB
// (driver go.mongodb.org/mongo-driver/v2). It passes the store/storetest contract suites.
//
// Collections (names configurable through Options):
//
//   - _wt_checkpoints: one document per stream,
//     {_id: stream, token, clusterTime, source, epoch, owner, settled, updatedAt}.
//     token and clusterTime are left out when unknown.
//   - _wt_dead_letters: one document per stream and event ID (streams that watch the same
//     collection each keep their own record of an event),
//     {_id: {stream, id: event ID}, stream, token, operationType, documentKey, namespace,
//     event, eventOmitted, error, errorType, stack, attempts, firstAttemptAt, lastAttemptAt,
//     createdAt, expiresAt, replayCount, lastReplayAt}; optional fields are left out when
//     empty; event is left out (eventOmitted: true) when the record would exceed the 16 MiB
//     document limit. The key is the compound _id, so its uniqueness needs no index.
//     Indexes: a TTL index on expiresAt (expireAfterSeconds 0: the server deletes a document
//     once its expiresAt has passed; documents without expiresAt never expire) and
//     {stream: 1, createdAt: 1} for listing.
//   - _wt_gaps: one document per gap ID,
//     {_id, stream, fromToken, fromTime, toToken, toTime, policy, reason, at}. Index
//     {stream: 1, at: 1}.
//
// Fencing: Save is one atomic conditional upsert, a replaceOne with filter
// {_id: stream, $or: [{epoch: {$lte: E}}, {epoch: {$exists: false}}]} and upsert: true. If a
// higher epoch holds the document the filter matches nothing, the upsert tries to insert a second
// document with the same _id and the server answers DuplicateKey (11000), which Save reports as
// store.ErrFenced. A DuplicateKey can also come from a concurrent first save by a lower or equal
// epoch; so Save retries once, and only a second DuplicateKey (the document now exists, and its
// epoch is higher) is ErrFenced.
//
// Durability: writes use write concern majority (Options.WriteConcern) and reads go to the
// primary, so a save that reported success survives a failover. Retryable writes (the driver's
// default) make a write whose connection died mid-flight safe to retry; without them a write
// may be applied yet reported failed, which is harmless because every write is an idempotent
// upsert by _id (MarkReplayed excepted: its retry may count a replay twice).
//
// Expiry: the TTL monitor of a real server runs every 60 seconds, so an expired dead letter may
// linger for up to a minute. Reads therefore also filter on expiresAt with the store's clock
// (Options.Now): a dead letter is absent from every read once Now() is after its expiresAt.
//
// Errors: a done context makes every method return an error matching ctx.Err() (checked before
// any I/O, and after a failed one). A server that is down or frozen makes a call fail when the
// context's deadline passes, or after the client's serverSelectionTimeout (30s by default) when
// the context has no deadline.
package mongostore
