package consoleserver

import (
	"testing"
	"time"

	"github.com/watchtree/watchtree/internal/streamstatus"
	"github.com/watchtree/watchtree/messages"
)

// TestRowNoteCarriesWarnings: the supervisor's warnings (a collection that does not exist) reach
// the console's row note, after what could not be read.
func TestRowNoteCarriesWarnings(t *testing.T) {
	row := &messages.StreamRow{Note: "dead letters: timeout"}
	r := &messages.StatusReply{Stream: "s", Warnings: []string{"namespace db.ordrs does not exist"}}
	fillRow(row, streamstatus.Read(r), time.Now())
	if want := "dead letters: timeout; namespace db.ordrs does not exist"; row.GetNote() != want {
		t.Fatalf("note %q, want %q", row.GetNote(), want)
	}
	quiet := &messages.StreamRow{}
	fillRow(quiet, streamstatus.Read(&messages.StatusReply{Stream: "s"}), time.Now())
	if quiet.GetNote() != "" {
		t.Fatalf("note %q without warnings", quiet.GetNote())
	}
}
