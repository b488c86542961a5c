package mongostore_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/store/mongostore"
	"github.com/watchtree/watchtree/store/storetest"
	"github.com/watchtree/watchtree/test/mongosim"
)

// Many lease watches on a client with a small pool: the watches share one change stream, so
// they leave the pool to the lease calls (a watch per lease would hold a connection each in a
// getMore, and with more watches than connections every lease call would wait for the pool
// past its one-second bound), and each watch still hears of a change of its lease.
func TestLeaseWatchesShareOneChangeStream(t *testing.T) {
	e := newEnv(t, mongosim.Options{}, func(o *options.ClientOptions) { o.SetMaxPoolSize(4) })
	s, _ := e.newStore(t, mongostore.Options{})
	storetest.WatchEach(t, s, 24, time.Second)
}
