package tokentime

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestOfReadsTheLeadingTimestamp(t *testing.T) {
	// 0x82, seconds 0x65000000, increment 7, then whatever the server appends.
	tok, err := bson.Marshal(bson.D{{Key: "_data", Value: "8265000000000000070000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	at, ts, ok := Of(tok)
	if !ok || ts.T != 0x65000000 || ts.I != 7 || !at.Equal(time.Unix(0x65000000, 0)) {
		t.Fatalf("Of = %v %v %v", at, ts, ok)
	}
	if Data(tok) != "8265000000000000070000000000" {
		t.Fatalf("Data = %q", Data(tok))
	}
	for _, bad := range []string{"", "82", "7165000000000000070000", "zz65000000000000070000"} {
		raw, _ := bson.Marshal(bson.D{{Key: "_data", Value: bad}})
		if _, _, ok := Of(raw); ok {
			t.Errorf("Of(%q) ok, want unknown", bad)
		}
	}
	if _, _, ok := Of(nil); ok {
		t.Error("Of(nil) ok")
	}
}
