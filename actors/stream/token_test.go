package stream

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/messages"
)

func rawToken(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A saved token of the wrong shape is lost before the server is asked; a server's refusal of a
// token counts only when the message names the token, since the same codes mean other mistakes.
func TestUnusableAndRefusedTokens(t *testing.T) {
	good := rawToken(t, bson.D{{Key: "_data", Value: "8265A1B2C3000000012B022C0100296E5A1004"}})
	resume := func(tok bson.Raw) Position {
		return Position{Kind: messages.StartKind_START_KIND_RESUME_AFTER, Token: tok}
	}
	for _, c := range []struct {
		name     string
		pos      Position
		unusable bool
	}{
		{"server shape", resume(good), false},
		{"not hex", resume(rawToken(t, bson.D{{Key: "_data", Value: "zz"}})), true},
		{"wrong type", resume(rawToken(t, bson.D{{Key: "_data", Value: int32(1)}})), true},
		{"no _data", resume(rawToken(t, bson.D{{Key: "x", Value: "y"}})), true},
		{"startAfter", Position{Kind: messages.StartKind_START_KIND_START_AFTER, Token: rawToken(t, bson.D{{Key: "_data", Value: "00"}})}, true},
		{"operation time", Position{Kind: messages.StartKind_START_KIND_START_AT_OPERATION_TIME}, false},
	} {
		if got := unusableToken(c.pos) != ""; got != c.unusable {
			t.Errorf("%s: unusable %v, want %v (%q)", c.name, got, c.unusable, unusableToken(c.pos))
		}
	}
	refused := mongo.CommandError{Code: 9, Message: "resume token string was not a valid hex string"}
	pipelineTypo := mongo.CommandError{Code: 2, Message: "unknown top level operator: $mach"}
	if !tokenRefused(resume(good), refused) {
		t.Error("FailedToParse naming the resume token: not taken as a refused token")
	}
	if tokenRefused(resume(good), pipelineTypo) {
		t.Error("a BadValue about the pipeline taken as a refused token")
	}
	if tokenRefused(Position{Kind: messages.StartKind_START_KIND_START_AT_OPERATION_TIME}, refused) {
		t.Error("a start at an operation time has no token to refuse")
	}
	if tokenRefused(resume(good), errors.New("resume token")) {
		t.Error("a client-side error taken as the server's refusal")
	}
}
