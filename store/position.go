package store

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ComparePositions orders the positions of two checkpoints of one scope, as every
// CheckpointStore must when it refuses a save that moves backward (ErrBackward):
//
//   - by the resume tokens' _data strings, compared byte by byte, when both have one (the
//     server encodes a token's _data so that this order is the order of the change stream);
//   - else by ClusterTime, when both know one (a position known only by its time, such as a
//     StartAt start or a Rebuild's, against any other);
//   - else the two are not comparable: ok is false, and a store accepts the save.
//
// It returns -1 when a sorts before b, 0 when they are equal, +1 when a sorts after b.
func ComparePositions(a, b Checkpoint) (cmp int, ok bool) {
	da, oka := tokenData(a.Token)
	db, okb := tokenData(b.Token)
	if oka && okb {
		return strings.Compare(da, db), true
	}
	if a.ClusterTime.IsZero() || b.ClusterTime.IsZero() {
		return 0, false
	}
	return a.ClusterTime.Compare(b.ClusterTime), true
}

// tokenData returns the _data string of a resume token document; ok is false when tok is nil,
// not a document, or has no string _data.
func tokenData(tok bson.Raw) (string, bool) {
	if len(tok) == 0 {
		return "", false
	}
	v, err := tok.LookupErr("_data")
	if err != nil {
		return "", false
	}
	return v.StringValueOK()
}

// DescribePosition is a position for a log line or an error: the token's _data, else the
// cluster time, else "none".
func DescribePosition(cp Checkpoint) string {
	if d, ok := tokenData(cp.Token); ok {
		return "token " + d
	}
	if !cp.ClusterTime.IsZero() {
		return "cluster time " + strconv.FormatUint(uint64(cp.ClusterTime.T), 10) + "." + strconv.FormatUint(uint64(cp.ClusterTime.I), 10)
	}
	return "none"
}
