package consoleserver_test

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

// FuzzRemotePort sends a peer's MessageBatch with a random protobuf type name and random
// message bytes to the console's remote port, and checks after each input that the process
// still serves. `go test` runs the seeds; `go test -fuzz FuzzRemotePort ./internal/consoleserver/` explores.
func FuzzRemotePort(f *testing.F) {
	f.Add("does.not.Exist", []byte{0x0a, 0x03, 'a', 'b', 'c'}, int32(0), int32(0))
	f.Add("watchtree.v1.SnapshotRequest", []byte{0xff, 0xff, 0xff}, int32(0), int32(0))
	f.Add("watchtree.v1.ControlRequest", []byte{0x08, 0x02, 0x12, 0x04, 'd', 'o', 'c', 's'}, int32(0), int32(0))
	f.Add("actor.Watch", []byte{}, int32(0), int32(1))
	f.Add("actor.PoisonPill", []byte{}, int32(0), int32(0))
	f.Add("remote.ActorPidRequest", []byte{0x0a, 0x01, 'x'}, int32(-1), int32(0))
	f.Add("", []byte("\x00\x01\x02"), int32(7), int32(-3))
	f.Fuzz(func(t *testing.T, typeName string, data []byte, typeID, sender int32) {
		b := &remote.MessageBatch{
			TypeNames: []string{typeName},
			Targets:   []*actor.PID{consoleTarget()},
			Envelopes: []*remote.MessageEnvelope{{TypeId: typeID, Target: 0, Sender: sender, MessageData: data}},
			// A sender on the console's own address: a reply is a local dead letter, never a
			// dial to an unreachable peer.
			Senders: []*actor.PID{actor.NewPID(live.addr, "fuzz-sender")},
		}
		_ = sendBatch(t, b) // refused or delivered: either way the process must go on
		serving(t)
	})
}
