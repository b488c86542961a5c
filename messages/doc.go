// Package messages holds the public protobuf protocol of watchtree: the commands a stream's
// supervisor takes (Start, Stop, Restart, StatusRequest, AwaitRunning), the StatusReply it
// answers with, and the remote console's requests, replies and lifecycle feed. They cross
// process boundaries (protoactor remote, the console's gRPC facade), so their field numbers are
// stable. The tree's private actor-to-actor traffic is in an internal package. Generated from
// proto/watchtree/v1 by `make proto`; the generated code is committed.
package messages
