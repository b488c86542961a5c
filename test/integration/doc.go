// Package integration holds watchtree's end-to-end scenarios (issue 3, "Tests that show it is
// done"): a real runtime, real stream trees and the real MongoDB driver, against the embedded
// simulator (test/mongosim) by default.
//
// Every scenario also runs, unchanged, against a real replica set:
//
//	WATCHTREE_MONGODB_URI='mongodb://localhost:27017/?replicaSet=rs0' go test -C test -race ./integration/
//
// Each test then works in a database of its own (wt_<test>_<random>), dropped at the end. Fail
// points (configureFailPoint failCommand) need a server started with
// --setParameter enableTestCommands=1; they are scoped to the runtime's client by appName, so
// tests never disturb each other. Scenarios that need a simulator-only hook (StepDown,
// TruncateOplog, KillAllConnections) skip with a message saying so when a real URI is set.
//
// WATCHTREE_IT_LOG=1 sends each runtime's logs (zap, debug level) to the test log.
//
// The crash-resume drill with SIGKILL re-executes the test binary as a worker process
// (environment variable WATCHTREE_IT_WORKER, see worker_test.go), kills it mid-stream and starts
// it again.
package integration
