package redisstore_test

import (
	"github.com/watchtree/watchtree"
	"github.com/watchtree/watchtree/store/redisstore"
)

// The Redis store is a watchtree.LeaseStore, as the root package's leases_test.go checks for the
// stores of the root module.
var _ watchtree.LeaseStore = (*redisstore.Store)(nil)
