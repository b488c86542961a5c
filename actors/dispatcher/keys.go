package dispatcher

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/watchtree/watchtree/internal/rawbson"
)

// laneKey returns the bytes that pick an event's lane: the documentKey document of the raw
// change event (with its length prefix). ok is false for events without one (drop, rename,
// dropDatabase, invalidate) and for malformed events; those are barriers (see Config.Lanes).
func laneKey(raw []byte) (key []byte, ok bool) {
	el, ok := rawbson.Lookup(raw, "documentKey")
	if !ok || el.Type != bsoncore.TypeEmbeddedDocument {
		return nil, false
	}
	return el.Value, true
}

// LaneOf returns the lane (0 to lanes-1) the dispatcher runs the raw change event on, by the
// rule of Config.Lanes: FNV-1a of its documentKey, modulo lanes. An event without a documentKey
// (a barrier, which runs alone) is given lane 0. Callers that keep per-lane state beside the
// dispatcher (the exactly-once fences) use it so that their lanes are the dispatcher's.
func LaneOf(raw []byte, lanes int) int {
	key, ok := laneKey(raw)
	if !ok || lanes <= 1 {
		return 0
	}
	return laneOf(key, lanes)
}

// laneOf hashes key with 64-bit FNV-1a (deterministic, allocation-free) onto one of n lanes.
func laneOf(key []byte, n int) int {
	h := uint64(14695981039346656037)
	for _, b := range key {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return int(h % uint64(n))
}

// tokenOf returns the value of a change event's first _id field, its resume token (a sub-slice
// of raw), or nil when it has none. The server writes _id first, so this reads one element.
func tokenOf(raw []byte) []byte {
	if el, ok := rawbson.Lookup(raw, "_id"); ok {
		return el.Value
	}
	return nil
}
