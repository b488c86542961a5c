package kafkasink_test

import (
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkasink "github.com/watchtree/watchtree/sink/kafka"
	"github.com/watchtree/watchtree/sink/sinktest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// brokersEnv names a real Kafka cluster (comma-separated host:port seed brokers) the tests
// use instead of kfake, franz-go's in-process cluster; the tests are the same either way.
const brokersEnv = "WATCHTREE_KAFKA_BROKERS"

const wait = 20 * time.Second

// cluster returns the seed brokers of the cluster under test: WATCHTREE_KAFKA_BROKERS when
// set, else a fresh kfake cluster of 3 brokers, closed when t ends.
func cluster(t testing.TB) []string {
	t.Helper()
	if env := os.Getenv(brokersEnv); env != "" {
		return strings.Split(env, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// admin returns a kadm client on brokers, closed when t ends.
func admin(t testing.TB, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates topic with partitions partitions (an existing one is kept), deleted
// when t ends.
func createTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
}

func publisher(t testing.TB, o kafkasink.Options) *kafkasink.Publisher {
	t.Helper()
	p, err := kafkasink.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// readTopic returns every record topic holds, partition by partition, each in offset order:
// it reads from the start up to the end offsets listed first.
func readTopic(t testing.TB, brokers []string, adm *kadm.Client, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("start offsets of %s: %v", topic, err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		want += o.Offset - s.Offset
	})
	if want == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records within %v", topic, len(out), want, wait)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s[%d]: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// header returns r's header key ("" when absent).
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// received is r as the sink tests' harnesses read it.
func received(r *kgo.Record) sinktest.Received {
	return sinktest.Received{ID: header(r, kafkasink.EventIDHeader), Key: string(r.Key), Subject: r.Topic, Payload: r.Value,
		Partition: r.Partition, Offset: r.Offset}
}

// replicaSet starts a mongosim replica set for sinktest's Drill and Relay.
func replicaSet(ctx context.Context) (sinktest.ReplicaSet, error) {
	return mongosim.Start(ctx, mongosim.Options{})
}
