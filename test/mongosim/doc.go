// Package mongosim is an in-process, MongoDB-wire-compatible replica-set primary for tests.
//
// The official Go driver (go.mongodb.org/mongo-driver/v2) connects to it unchanged over TCP:
//
//	srv, err := mongosim.Start(ctx, mongosim.Options{})
//	if err != nil { ... }
//	defer srv.Close()
//	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
//
// It answers the legacy OP_QUERY handshake and OP_MSG commands, reports itself as the primary of
// replica set "rs0", and implements CRUD (with hints on writes, $out and $merge), indexes
// (unique, partial, TTL), English collations, views, capped, clustered, time-series and
// validated collections, sessions, retryable-write dedupe, multi-document transactions,
// snapshot reads at a cluster time and change streams with ordered, opaque resume tokens and a
// bounded oplog. Faults are injected with the server's own configureFailPoint and
// replSetStepDown commands or with Go
// hooks (KillAllConnections, StepDown, TruncateOplog, Pause).
//
// Anything it does not support fails with one error code, 9000001, whose message names the
// feature ("mongosim does not support ..."); a command no server has gets CommandNotFound (59).
// It never answers silently wrong.
package mongosim
