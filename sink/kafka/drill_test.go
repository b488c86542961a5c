package kafkasink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/watchtree/watchtree/sink"
	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/sink/sinktest"
)

// drillOptions are the drill's sink options: subject "{db}.{coll}", so that inserts and
// updates of a document share one topic, "<root>.docs", and so one partition.
var drillOptions = sink.Options{Subject: "{db}.{coll}"}

// openDrillPublisher is a drill worker's publisher: the sink on its own client to the
// comma-separated brokers.
func openDrillPublisher(_ context.Context, brokers, _ string) (sink.Publisher, func(), error) {
	p, err := kafkasink.New(kafkasink.Options{Brokers: strings.Split(brokers, ",")})
	if err != nil {
		return nil, nil, err
	}
	return p, p.Close, nil
}

// TestSIGKILLDrill is sinktest's SIGKILL drill into a topic of 6 partitions (kfake in this
// process, or WATCHTREE_KAFKA_BROKERS): 3 kills under load, then every committed write is in
// the topic, each document's versions in order in one partition. Kafka deduplicates only
// within one producer session (one worker's client), so an event republished after a kill is
// stored again: such duplicates are counted and bounded, and each must repeat an event stored
// before it, of the same key.
func TestSIGKILLDrill(t *testing.T) {
	brokers := cluster(t)
	adm := admin(t, brokers)
	root := fmt.Sprintf("wtkafkadrill%d", time.Now().UnixNano()%1e9)
	topic := root + ".docs"
	createTopic(t, adm, topic, 6)
	next := map[int32]int64{} // per partition, the first offset Read has not returned
	sinktest.Drill{
		Start:  replicaSet,
		Root:   root,
		Broker: strings.Join(brokers, ","),
		Count: func(t *testing.T) int64 {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err == nil {
				err = ends.Error()
			}
			if err != nil {
				t.Fatalf("end offsets: %v", err)
			}
			var n int64
			ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
			return n
		},
		Read: func(t *testing.T) []sinktest.Received {
			var out []sinktest.Received
			for _, r := range readTopic(t, brokers, adm, topic) {
				if r.Offset >= next[r.Partition] {
					out = append(out, received(r))
					next[r.Partition] = r.Offset + 1
				}
			}
			return out
		},
	}.Run(t)
}
