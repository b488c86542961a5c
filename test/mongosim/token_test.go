package mongosim

import (
	"math/rand/v2"
	"regexp"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestChangeStreamTokenFormat(t *testing.T) {
	tok := resumeToken{ts: bson.Timestamp{T: 0x6553F100, I: 7}, tokenType: tokenTypeEvent, txnOpIndex: 3, seq: 0x1234}
	got := tok.hex()
	want := "826553F10000000007" + "80" + "00000003" + "00" + "0000000000001234"
	if got != want {
		t.Fatalf("hex = %s, want %s", got, want)
	}
	if !regexp.MustCompile(`^[0-9A-F]{46}$`).MatchString(got) {
		t.Fatalf("not 46 uppercase hex digits: %s", got)
	}
	d := tok.doc()
	if len(d) != 1 || d[0].Key != "_data" || d[0].Value != want {
		t.Fatalf("doc = %v", d)
	}
	inv := tok
	inv.fromInvalidate = true
	if inv.hex() != "826553F10000000007800000000301"+"0000000000001234" {
		t.Fatalf("invalidate hex = %s", inv.hex())
	}
	if h := hwmToken(bson.Timestamp{T: 1, I: 2}).hex(); h != "82000000010000000200"+"00000000"+"00"+"0000000000000000" {
		t.Fatalf("hwm hex = %s", h)
	}
}

func TestChangeStreamTokenRoundTrip(t *testing.T) {
	toks := []resumeToken{
		hwmToken(bson.Timestamp{T: 100, I: 1}),
		{ts: bson.Timestamp{T: 100, I: 1}, tokenType: tokenTypeEvent, seq: 1},
		{ts: bson.Timestamp{T: ^uint32(0), I: ^uint32(0)}, tokenType: tokenTypeEvent, txnOpIndex: ^uint32(0), fromInvalidate: true, seq: ^uint64(0)},
	}
	for _, tok := range toks {
		got, err := decodeResumeToken(tok.doc())
		if err != nil {
			t.Fatalf("decode %s: %v", tok.hex(), err)
		}
		if got != tok {
			t.Fatalf("round trip %s: got %+v want %+v", tok.hex(), got, tok)
		}
	}
	// _typeBits is tolerated, as on a real server.
	d := append(toks[1].doc(), bson.E{Key: "_typeBits", Value: bson.Binary{Data: []byte{1}}})
	if _, err := decodeResumeToken(d); err != nil {
		t.Fatalf("_typeBits rejected: %v", err)
	}
}

func TestChangeStreamTokenOrderMatchesStreamOrder(t *testing.T) {
	// Stream order built by hand: HWM(T) < events at T (by txnOpIndex) < the invalidate caused
	// by an event < the next event < HWM(T+1).
	ts := func(t, i uint32) bson.Timestamp { return bson.Timestamp{T: t, I: i} }
	e1 := &oplogEntry{seq: 9, ts: ts(5, 2)}
	e2 := &oplogEntry{seq: 10, ts: ts(5, 3), txnOpIndex: 0}
	e3 := &oplogEntry{seq: 11, ts: ts(5, 3), txnOpIndex: 1}
	e4 := &oplogEntry{seq: 12, ts: ts(6, 1)}
	ordered := []resumeToken{
		hwmToken(ts(5, 1)),
		hwmToken(ts(5, 2)),
		eventToken(e1),
		invalidateToken(e1),
		hwmToken(ts(5, 3)),
		eventToken(e2),
		eventToken(e3),
		invalidateToken(e3),
		hwmToken(ts(5, 4)),
		hwmToken(ts(6, 0)),
		eventToken(e4),
		hwmToken(ts(7, 0)),
	}
	for i := 1; i < len(ordered); i++ {
		a, b := ordered[i-1], ordered[i]
		if a.compare(b) >= 0 || b.compare(a) <= 0 {
			t.Fatalf("compare: %s should precede %s", a.hex(), b.hex())
		}
		if !(a.hex() < b.hex()) {
			t.Fatalf("string order: %s should precede %s", a.hex(), b.hex())
		}
	}
	// Shuffled strings sort back into stream order.
	strs := make([]string, len(ordered))
	for i, o := range ordered {
		strs[i] = o.hex()
	}
	shuffled := append([]string(nil), strs...)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sort.Strings(shuffled)
	for i := range strs {
		if shuffled[i] != strs[i] {
			t.Fatalf("sorted[%d] = %s, want %s", i, shuffled[i], strs[i])
		}
	}
	if maxToken(ordered[3], ordered[2]) != ordered[3] || maxToken(ordered[2], ordered[3]) != ordered[3] {
		t.Fatal("maxToken picked the earlier token")
	}
}

func TestChangeStreamTokenDecodeErrors(t *testing.T) {
	valid := eventToken(&oplogEntry{seq: 1, ts: bson.Timestamp{T: 1, I: 1}}).hex()
	cases := []struct {
		name string
		tok  any
		code int32
	}{
		{"not a document", "abc", codeTypeMismatch},
		{"missing _data", bson.D{}, 40647},
		{"_data not a string", bson.D{{Key: "_data", Value: int32(1)}}, 40647},
		{"not hex", bson.D{{Key: "_data", Value: "82ZZ"}}, codeFailedToParse},
		{"odd length", bson.D{{Key: "_data", Value: "820"}}, codeFailedToParse},
		{"too short", bson.D{{Key: "_data", Value: "8200"}}, codeBadValue},
		{"wrong prefix", bson.D{{Key: "_data", Value: "83" + valid[2:]}}, codeBadValue},
		{"bad token type", bson.D{{Key: "_data", Value: valid[:18] + "7F" + valid[20:]}}, codeBadValue},
		{"bad invalidate flag", bson.D{{Key: "_data", Value: valid[:28] + "02" + valid[30:]}}, codeBadValue},
		{"event with seq 0", bson.D{{Key: "_data", Value: valid[:30] + "0000000000000000"}}, codeBadValue},
		{"unknown field", bson.D{{Key: "_data", Value: valid}, {Key: "x", Value: 1}}, 40647},
		{"real server token", bson.D{{Key: "_data", Value: "826553F100000000012B042C0100296E5A100400000000000000000000000000000001"}}, codeBadValue},
	}
	for _, tc := range cases {
		_, err := decodeResumeToken(tc.tok)
		if err == nil {
			t.Errorf("%s: decoded without error", tc.name)
			continue
		}
		if err.Code != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.name, err.Code, err.Msg, tc.code)
		}
	}
}
