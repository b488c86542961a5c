package history

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadSkipsOnlyATornLastLine: a writer killed mid-record leaves a torn last line, which
// Read drops; a bad line before the last is an error naming the file and line.
func TestReadSkipsOnlyATornLastLine(t *testing.T) {
	good := `{"type":"write","key":"k","seq":1,"start":"2026-01-02T03:04:05Z"}`
	recs, err := Read(strings.NewReader(good+"\n"+`{"type":"ca`), "n1.jsonl")
	if err != nil || len(recs) != 1 || recs[0].Key != "k" {
		t.Fatalf("torn last line: %v, %v", recs, err)
	}
	if _, err := Read(strings.NewReader(`{"type":"ca`+"\n"+good+"\n"), "n1.jsonl"); err == nil || !strings.Contains(err.Error(), "n1.jsonl:1") {
		t.Fatalf("bad first line: err = %v, want one naming n1.jsonl:1", err)
	}
}

// TestWriterRoundTrip: records written by two writers come back from ReadDir sorted by Start.
func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, name := range []string{"a.jsonl", "b.jsonl"} {
		w, err := Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		w.Add(Record{Type: Call, Key: name, Start: t0.Add(time.Duration(2-i) * time.Second), End: t0.Add(3 * time.Second)})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := ReadDir(dir)
	if err != nil || len(recs) != 2 || recs[0].Key != "b.jsonl" || !recs[1].End.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("ReadDir = %+v, %v; want b's record first", recs, err)
	}
}
