// Package memstore is an in-memory implementation of watchtree's checkpoint, gap and dead-letter
// stores, for actor unit tests and benchmarks. It passes the store/storetest contract suites.
//
// A Store is safe for concurrent use (one mutex). It copies every record on the way in and on
// the way out, so callers may reuse their buffers. Nothing survives the process.
//
// Tests can make it fail or block through SetFault and count its calls through Stats.
package memstore
