package stream

import (
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/internal/tokentime"
	"github.com/watchtree/watchtree/messages"
)

// unusableToken says why pos's resume token cannot be resumed from ("" when it can, or pos has
// no token). Every resume token a server issues is {_data: "<hex>"} whose key string starts with
// the event's cluster time (the type byte 0x82 and 8 bytes); a saved token without that shape
// was damaged in storage, written by hand, or is not a resume token at all.
func unusableToken(pos Position) string {
	if pos.Kind != messages.StartKind_START_KIND_RESUME_AFTER && pos.Kind != messages.StartKind_START_KIND_START_AFTER {
		return ""
	}
	if _, _, ok := tokentime.Of(pos.Token); ok {
		return ""
	}
	return fmt.Sprintf("the saved resume token %s is not a resume token (want {_data: \"82<cluster time>…\"}): its position is lost",
		tokenString(pos.Token))
}

// tokenString renders a token (extended JSON) for a log line or a gap reason, cut to a readable
// length.
func tokenString(tok bson.Raw) string {
	const limit = 80
	if len(tok) == 0 {
		return "(none)"
	}
	s := tok.String()
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}

// badTokenCodes are the codes a server answers a resumeAfter or startAfter it cannot read with:
// BadValue (2), FailedToParse (9), TypeMismatch (14), 40647 (a malformed token document) and the
// key string decoding errors 50811 and 50818. Most of them also mean other mistakes, so the
// message must name the token too.
var badTokenCodes = []int{2, 9, 14, 40647, 50811, 50818}

// tokenRefused reports whether err is the server refusing pos's resume token itself.
func tokenRefused(pos Position, err error) bool {
	if pos.Kind != messages.StartKind_START_KIND_RESUME_AFTER && pos.Kind != messages.StartKind_START_KIND_START_AFTER {
		return false
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	msg := strings.ToLower(err.Error())
	if !strings.Contains(msg, "resume token") && !strings.Contains(msg, "keystring") {
		return false
	}
	for _, c := range badTokenCodes {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}
