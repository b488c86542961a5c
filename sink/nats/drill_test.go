package natssink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/watchtree/watchtree/sink"
	natssink "github.com/watchtree/watchtree/sink/nats"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// openDrillPublisher is a drill worker's publisher: a JetStream on its own connection to url.
func openDrillPublisher(_ context.Context, url, _ string) (sink.Publisher, func(), error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	p, err := natssink.New(js)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return p, nc.Close, nil
}

// TestSIGKILLDrill is sinktest's SIGKILL drill into one JetStream stream taking <root>.>: 3
// kills under load, then every committed write is in the stream, each document's versions in
// order, and there are no duplicates although events were republished (the workers' acks
// outnumber the messages: the stream dropped the repeats within its duplicate window).
func TestSIGKILLDrill(t *testing.T) {
	nc, js := connect(t)
	root := fmt.Sprintf("wtnatsdrill%d", time.Now().UnixNano()%1e9)
	stream := newStream(t, js, root, 0)
	next := uint64(1) // the first stream sequence Read has not returned
	sinktest.Drill{
		Start:  replicaSet,
		Root:   root,
		Broker: nc.ConnectedUrl(),
		Count:  func(t *testing.T) int64 { return int64(streamInfo(t, stream).State.Msgs) },
		Read: func(t *testing.T) []sinktest.Received {
			rs := readFrom(t, stream, next)
			if len(rs) > 0 {
				next = uint64(rs[len(rs)-1].Offset) + 1
			}
			return rs
		},
		Dedups: true,
	}.Run(t)
}
