module github.com/watchtree/watchtree/store/redisstore

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.17.3
	github.com/watchtree/watchtree v0.1.0
	go.mongodb.org/mongo-driver/v2 v2.10.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)

// Our own modules build from this checkout. A consumer ignores these replace directives
// and fetches the tagged versions required above (the README's "Release order" says which
// to tag first).
replace (
	github.com/watchtree/watchtree => ../..
	github.com/watchtree/watchtree/test/mongosim => ../../test/mongosim
)
