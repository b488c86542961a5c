// Package tokentime reads the cluster time a change stream's resume token starts with.
//
// A server's resume token is {_data: "<hex>"}: the hex of a key string whose first value is the
// event's cluster time, a BSON timestamp encoded as the type byte 0x82 followed by the 8-byte
// big-endian (seconds<<32 | increment). Both the real server and test/mongosim write tokens that
// way; anything else (a token of another shape, an operation time) is reported as unknown.
package tokentime

import (
	"encoding/binary"
	"encoding/hex"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Of returns the cluster time a resume token (a BSON document) starts with, with the timestamp's
// seconds and increment; ok is false when the token is not of the server's shape.
func Of(token []byte) (at time.Time, ts bson.Timestamp, ok bool) {
	if len(token) == 0 {
		return time.Time{}, bson.Timestamp{}, false
	}
	v, err := bson.Raw(token).LookupErr("_data")
	if err != nil {
		return time.Time{}, bson.Timestamp{}, false
	}
	data, isStr := v.StringValueOK()
	if !isStr {
		return time.Time{}, bson.Timestamp{}, false
	}
	return OfData(data)
}

// OfData is Of for the token's _data string.
func OfData(data string) (at time.Time, ts bson.Timestamp, ok bool) {
	if len(data) < 18 {
		return time.Time{}, bson.Timestamp{}, false
	}
	var b [9]byte
	if _, err := hex.Decode(b[:], []byte(data[:18])); err != nil || b[0] != 0x82 {
		return time.Time{}, bson.Timestamp{}, false
	}
	u := binary.BigEndian.Uint64(b[1:])
	ts = bson.Timestamp{T: uint32(u >> 32), I: uint32(u)}
	return time.Unix(int64(ts.T), 0).UTC(), ts, true
}

// Data returns the token's _data string, "" when it has none.
func Data(token []byte) string {
	if len(token) == 0 {
		return ""
	}
	v, err := bson.Raw(token).LookupErr("_data")
	if err != nil {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}
