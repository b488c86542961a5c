package kafkasink_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// TestStreamToKafkaThenAConsumerGroup is sinktest's relay test into a topic of 6 partitions
// (subject "{db}.{coll}": inserts and updates of a document share one topic, so its events
// share one partition): the group is three members of one Kafka consumer group, joined before
// the first write (each owns some partitions). Besides the group's view (every event once, by
// the event ID header; each member sees each key's events in order), each key's events sit in
// one partition in offset order, and every record reached the group once.
func TestStreamToKafkaThenAConsumerGroup(t *testing.T) {
	const members, partitions = 3, 6
	brokers := cluster(t)
	adm := admin(t, brokers)
	root := fmt.Sprintf("wtkafkae2e%d", time.Now().UnixNano()%1e9)
	topic := root + ".docs"
	createTopic(t, adm, topic, partitions)
	var assigned [members]atomic.Int32 // each member's partitions of topic
	sinktest.Relay{
		Start:     replicaSet,
		Root:      root,
		Publisher: publisher(t, kafkasink.Options{Brokers: brokers}),
		Options:   sink.Options{Subject: "{db}.{coll}"},
		Consume: func(ctx context.Context, c int, deliver func(sinktest.Received)) error {
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(root+"-group"), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned[c].Add(int32(len(m[topic]))) }),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned[c].Add(-int32(len(m[topic]))) }),
				kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned[c].Add(-int32(len(m[topic]))) }))
			if err != nil {
				return err
			}
			defer cl.Close()
			for {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return nil
				}
				var ferr error
				fs.EachError(func(tp string, p int32, err error) { ferr = fmt.Errorf("fetch %s[%d]: %w", tp, p, err) })
				if ferr != nil {
					return ferr
				}
				for _, r := range fs.Records() {
					deliver(received(r))
				}
			}
		},
		// Every member owns partitions, and all are owned.
		Joined: func() bool {
			sum := int32(0)
			for c := range members {
				n := assigned[c].Load()
				if n == 0 {
					return false
				}
				sum += n
			}
			return sum == partitions
		},
		Stored: func(t *testing.T) []sinktest.Received {
			var out []sinktest.Received
			for _, r := range readTopic(t, brokers, adm, topic) {
				out = append(out, received(r))
			}
			return out
		},
	}.Run(t)
}
