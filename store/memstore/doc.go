// Package memstore is an in-memory implementation of the store interfaces of package store:
// Store is the checkpoint, dead-letter, gap and snapshot store, Leases the lease store. It is
// for actor unit tests, benchmarks and users' own tests (set every store field of
// watchtree.Config to one), and passes the store/storetest contract suites.
//
// A Store is safe for concurrent use (one mutex). It copies every record on the way in and on
// the way out, so callers may reuse their buffers. Nothing survives the process.
//
// Tests can make it fail or block through SetFault and count its calls through Stats.
package memstore
