// Package observetest is what the tests of an exporter of watchtree's observations (the
// Prometheus and OpenTelemetry adapters, or one of your own) share, so that each of them asserts
// only its own output:
//
//   - Samples and EveryKind: one event of each observe.Kind, and the check that an exporter
//     accounts for every kind (it exports it, or says why not), so that a kind added to package
//     observe fails every exporter's test until it is decided on;
//   - Run: a real runtime on test/mongosim (or WATCHTREE_MONGODB_URI) through a retry, a dead
//     letter, a restart and a leader change.
//
// Only tests should import it: it starts servers and fails the test it is given.
package observetest
