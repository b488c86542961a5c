package watchtree

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestStreamSplitLargeEventsValidate(t *testing.T) {
	s := validStream()
	s.SplitLargeEvents = SplitMode(7)
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "SplitLargeEvents") {
		t.Fatalf("Validate: %v, want an error naming SplitLargeEvents", err)
	}
	for _, m := range []SplitMode{SplitAuto, SplitOn, SplitOff} {
		s.SplitLargeEvents = m
		if err := s.Validate(); err != nil {
			t.Fatalf("%v: %v", m, err)
		}
	}
}

// The zero value splits exactly the streams that can see events over 16 MiB (full documents or
// pre-images), on a server that has the stage; On and Off are what they say; a pipeline that
// ends with the stage itself never gets a second one.
func TestStreamSplitLargeEventsDecision(t *testing.T) {
	userSplit := []bson.D{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	cases := []struct {
		name         string
		edit         func(*Stream[testOrder])
		serverSplits bool
		want         bool
	}{
		{"auto, no images", func(*Stream[testOrder]) {}, true, false},
		{"auto, fullDocument", func(s *Stream[testOrder]) { s.FullDocument = FullDocumentUpdateLookup }, true, true},
		{"auto, pre-images", func(s *Stream[testOrder]) { s.FullDocumentBeforeChange = PreImageWhenAvailable }, true, true},
		{"auto, images, old server", func(s *Stream[testOrder]) { s.FullDocument = FullDocumentRequired }, false, false},
		{"on", func(s *Stream[testOrder]) { s.SplitLargeEvents = SplitOn }, false, true},
		{"off, images", func(s *Stream[testOrder]) {
			s.SplitLargeEvents, s.FullDocument = SplitOff, FullDocumentUpdateLookup
		}, true, false},
		{"user pipeline has it", func(s *Stream[testOrder]) {
			s.SplitLargeEvents, s.Pipeline = SplitOn, userSplit
		}, true, false},
	}
	for _, tc := range cases {
		s := validStream()
		tc.edit(&s)
		cs, err := s.compile()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := cs.WantsSplit(tc.serverSplits); got != tc.want {
			t.Errorf("%s: wantsSplit(%v) = %v, want %v", tc.name, tc.serverSplits, got, tc.want)
		}
	}
	if SplitAuto.String() != "SplitAuto" || SplitMode(9).String() != "SplitMode(9)" {
		t.Error("SplitMode.String")
	}
}
