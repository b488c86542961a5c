package errdetail

import (
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"google.golang.org/protobuf/proto"

	"github.com/watchtree/watchtree/internal/wire"
)

// roundTrip describes err, sends the description through the wire format and rebuilds it.
func roundTrip(t *testing.T, err error) error {
	t.Helper()
	b, merr := proto.Marshal(Of(err))
	if merr != nil {
		t.Fatal(merr)
	}
	var d wire.ErrorDetail
	if uerr := proto.Unmarshal(b, &d); uerr != nil {
		t.Fatal(uerr)
	}
	return Err(&d)
}

func TestRoundTrip(t *testing.T) {
	unknownStage := mongo.CommandError{Code: 40324, Name: "Location40324", Message: "Unrecognized pipeline stage name: '$matchh'"}
	for _, tc := range []struct {
		name   string
		err    error
		server bool
		codes  []int
		labels []string
		check  func(error) bool
	}{
		{"command error, wrapped", fmt.Errorf("capture the current position: %w", unknownStage), true, []int{40324}, nil,
			func(err error) bool {
				var ce mongo.CommandError
				return errors.As(err, &ce) && ce.Code == 40324 && ce.Name == "Location40324" &&
					ce.Message == "Unrecognized pipeline stage name: '$matchh'"
			}},
		{"network error", mongo.CommandError{Message: "connection closed", Labels: []string{"NetworkError"}}, true, []int{0},
			[]string{"NetworkError"}, mongo.IsNetworkError},
		{"MaxTimeMSExpired", mongo.CommandError{Code: 50, Name: "MaxTimeMSExpired", Message: "operation exceeded time limit"},
			true, []int{50}, nil, mongo.IsTimeout},
		{"resumable label", mongo.CommandError{Code: 6, Name: "HostUnreachable", Labels: []string{"ResumableChangeStreamError"}},
			true, []int{6}, []string{"ResumableChangeStreamError"}, nil},
		{"write exception", fmt.Errorf("save: %w", mongo.WriteException{
			WriteErrors:       mongo.WriteErrors{{Code: 11000, Message: "E11000 duplicate key"}},
			WriteConcernError: &mongo.WriteConcernError{Code: 91, Name: "ShutdownInProgress", Message: "shutting down"},
			Labels:            []string{"RetryableWriteError"}}),
			true, []int{11000, 91}, []string{"RetryableWriteError"}, nil},
		{"plain error", errors.New("boom"), false, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := roundTrip(t, tc.err)
			if got.Error() != tc.err.Error() {
				t.Errorf("text %q, want %q", got.Error(), tc.err.Error())
			}
			var se mongo.ServerError
			if errors.As(got, &se) != tc.server {
				t.Fatalf("server error: %v, want %v", !tc.server, tc.server)
			}
			for _, c := range tc.codes {
				if !se.HasErrorCode(c) {
					t.Errorf("code %d lost (codes %v)", c, se.ErrorCodes())
				}
			}
			for _, l := range tc.labels {
				if !se.HasErrorLabel(l) {
					t.Errorf("label %q lost", l)
				}
			}
			if tc.check != nil && !tc.check(got) {
				t.Errorf("%v (%T) lost what the driver's helpers look at", got, got)
			}
		})
	}
}

func TestNil(t *testing.T) {
	if Of(nil) != nil || Err(nil) != nil {
		t.Fatal("a nil error must describe as nil and a nil detail rebuild as nil")
	}
}

// A pipeline that changed the event's _id is told from a lost resume token (both 280) by the
// message, on the driver's error and on its rebuilt copy alike.
func TestPipelineModifiedID(t *testing.T) {
	modified := mongo.CommandError{Code: 280, Name: "ChangeStreamFatalError",
		Message: "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline."}
	notFound := mongo.CommandError{Code: 280, Name: "ChangeStreamFatalError",
		Message: "cannot resume stream; the resume token was not found."}
	other := mongo.CommandError{Code: 2, Name: "BadValue", Message: "the _id field was modified by the pipeline"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"modified", modified, true},
		{"modified, wrapped", fmt.Errorf("cursor: %w", modified), true},
		{"modified, rebuilt", roundTrip(t, modified), true},
		{"token not found", notFound, false},
		{"another code", other, false},
		{"not a server error", errors.New(modified.Message), false},
	} {
		if got := PipelineModifiedID(tc.err); got != tc.want {
			t.Errorf("%s: PipelineModifiedID = %v, want %v", tc.name, got, tc.want)
		}
	}
}
