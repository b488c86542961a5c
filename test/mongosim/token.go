package mongosim

import (
	"encoding/hex"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Resume-token types (the server's kHighWaterMarkToken and kEventToken).
const (
	tokenTypeHWM   = 0x00
	tokenTypeEvent = 0x80
)

// tokenHexLen is the length of a resume token's _data: "82" + t(8) + i(8) + type(2) +
// txnOpIndex(8) + fromInvalidate(2) + seq(16). The token of a fragment of a split event
// ($changeStreamSplitLargeEvent) appends the fragment number (8), so it sorts after the whole
// event's token and before the next event's.
const tokenHexLen = 2 + 8 + 8 + 2 + 8 + 2 + 16

// fragmentTokenHexLen is the length of a fragment token's _data.
const fragmentTokenHexLen = tokenHexLen + 8

// resumeToken is the decoded content of a change-stream resume token.
//
// Encoded as {_data: <uppercase hex>} with fixed-width fields (reference §3.6), so that the
// byte order of _data is the stream order: clusterTime first, then the token type (a
// high-water mark sorts before every event at the same cluster time), txnOpIndex,
// fromInvalidate (an invalidate sorts right after the event that caused it) and the oplog
// sequence number as the final tie-breaker.
type resumeToken struct {
	ts             bson.Timestamp
	tokenType      byte   // tokenTypeHWM or tokenTypeEvent
	txnOpIndex     uint32 // position among the entries sharing ts
	fromInvalidate bool
	seq            uint64 // oplog seq of the event; 0 for high-water marks
	fragment       uint32 // 1-based fragment number of a split event; 0 for a whole event
}

// hwmToken returns the high-water-mark token for cluster time ts: it sorts before every event
// at ts and after every event before ts.
func hwmToken(ts bson.Timestamp) resumeToken {
	return resumeToken{ts: ts, tokenType: tokenTypeHWM}
}

// eventToken returns the token of the event an oplog entry becomes.
func eventToken(en *oplogEntry) resumeToken {
	return resumeToken{ts: en.ts, tokenType: tokenTypeEvent, txnOpIndex: en.txnOpIndex, seq: en.seq}
}

// invalidateToken returns the token of the invalidate event caused by en: en's token with
// fromInvalidate set, so that it sorts right after en's event.
func invalidateToken(en *oplogEntry) resumeToken {
	t := eventToken(en)
	t.fromInvalidate = true
	return t
}

// isHWM reports whether t is a high-water-mark token (not tied to an event).
func (t resumeToken) isHWM() bool { return t.tokenType == tokenTypeHWM }

// hex returns the _data string: uppercase hex, fixed width.
func (t resumeToken) hex() string {
	inv := 0
	if t.fromInvalidate {
		inv = 1
	}
	s := fmt.Sprintf("82%08X%08X%02X%08X%02X%016X", t.ts.T, t.ts.I, t.tokenType, t.txnOpIndex, inv, t.seq)
	if t.fragment > 0 {
		s += fmt.Sprintf("%08X", t.fragment)
	}
	return s
}

// doc returns the token as clients see it: {_data: hex}.
func (t resumeToken) doc() bson.D {
	return bson.D{{Key: "_data", Value: t.hex()}}
}

// compare orders tokens by stream position: -1 if t precedes u, 0 if equal, +1 otherwise.
// It agrees with the byte order of the hex strings.
func (t resumeToken) compare(u resumeToken) int {
	switch {
	case t.ts != u.ts:
		if tsLess(t.ts, u.ts) {
			return -1
		}
		return 1
	case t.tokenType != u.tokenType:
		return cmp3(uint64(t.tokenType), uint64(u.tokenType))
	case t.txnOpIndex != u.txnOpIndex:
		return cmp3(uint64(t.txnOpIndex), uint64(u.txnOpIndex))
	case t.fromInvalidate != u.fromInvalidate:
		if u.fromInvalidate {
			return -1
		}
		return 1
	case t.seq != u.seq:
		return cmp3(t.seq, u.seq)
	default:
		return cmp3(uint64(t.fragment), uint64(u.fragment))
	}
}

func cmp3(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxToken returns the later of two tokens.
func maxToken(a, b resumeToken) resumeToken {
	if a.compare(b) < 0 {
		return b
	}
	return a
}

// decodeResumeToken parses a token document a client sent in resumeAfter or startAfter.
// It accepts {_data: <hex string>} with an optional _typeBits (ignored: our tokens never need
// it). Errors: 40647 when _data is missing or not a string, FailedToParse (9) when it is not a
// hex string, BadValue (2) when it is hex but not a token this server issued.
func decodeResumeToken(v any) (resumeToken, *cmdError) {
	var t resumeToken
	d, ok := v.(bson.D)
	if !ok {
		return t, errorf(codeTypeMismatch, "Bad resume token: the token must be an object, got %s", typeName(v))
	}
	var data any
	found := false
	for _, e := range d {
		switch e.Key {
		case "_data":
			data, found = e.Value, true
		case "_typeBits":
		default:
			return t, errorf(40647, "Bad resume token: unexpected field '%s'", e.Key)
		}
	}
	s, isStr := data.(string)
	if !found || !isStr {
		return t, errorf(40647, "Bad resume token: _data of missing or of wrong type. Expected string, got %s", typeNameOrMissing(data, found))
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return t, errorf(codeFailedToParse, "resume token string was not a valid hex string")
	}
	if (len(s) != tokenHexLen && len(s) != fragmentTokenHexLen) || !strings.HasPrefix(s, "82") || len(raw) != len(s)/2 {
		return t, errorf(codeBadValue, "Bad resume token: _data '%s' is not a resume token issued by this server", s)
	}
	be32 := func(b []byte) uint32 { return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) }
	t.ts = bson.Timestamp{T: be32(raw[1:5]), I: be32(raw[5:9])}
	t.tokenType = raw[9]
	t.txnOpIndex = be32(raw[10:14])
	inv := raw[14]
	for _, b := range raw[15:23] {
		t.seq = t.seq<<8 | uint64(b)
	}
	if len(raw) == fragmentTokenHexLen/2 {
		t.fragment = be32(raw[23:27])
	}
	switch {
	case len(raw) == fragmentTokenHexLen/2 && (t.fragment == 0 || t.tokenType != tokenTypeEvent || inv != 0):
		return t, errorf(codeBadValue, "Bad resume token: _data '%s' is not a resume token issued by this server", s)
	case t.tokenType != tokenTypeHWM && t.tokenType != tokenTypeEvent,
		inv > 1,
		t.tokenType == tokenTypeHWM && (t.txnOpIndex != 0 || inv != 0 || t.seq != 0),
		t.tokenType == tokenTypeEvent && t.seq == 0:
		return t, errorf(codeBadValue, "Bad resume token: _data '%s' is not a resume token issued by this server", s)
	}
	t.fromInvalidate = inv == 1
	return t, nil
}

func typeNameOrMissing(v any, found bool) string {
	if !found {
		return "missing"
	}
	return typeName(v)
}
