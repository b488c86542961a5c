// Package history is the record of a chaos soak: what the load generator committed, what the
// nemesis did, and what every node's handlers, leases and checkpoints did, one JSON object per
// line. Nodes write their own files with one write(2) per record, so a SIGKILL loses at most
// the record being written; the checker reads every file back.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Type says what a Record describes.
type Type string

// The record types.
const (
	// Write: the load generator's write of Key at Seq. Outcome says whether it committed.
	Write Type = "write"
	// Call: one handler call (Start, End, Err) of Stream on Node (its InstanceID Instance).
	Call Type = "call"
	// Lease: a LeadershipChanged event (Change, Epoch, Owner, ExpiresAt) of Instance.
	Lease Type = "lease"
	// Checkpoint: a Checkpointed event: Pos is the resume token's _data, Epoch the lease
	// epoch held then (0 for AllInstances).
	Checkpoint Type = "checkpoint"
	// DeadLetter: a DeadLettered event for EventID.
	DeadLetter Type = "deadletter"
	// Started: the stream's cursor opened (a new delivery session on the instance).
	Started Type = "started"
	// Stopped: the stream stopped (Err is the cause of a crash; Terminal when it stays down).
	Stopped Type = "stopped"
	// Gap: a GapRecorded event (the lost-history policy skipped history on purpose).
	Gap Type = "gap"
	// Fault: one nemesis fault, Kind on Node (empty: the server or every node), from Start
	// to End (healed).
	Fault Type = "fault"
	// Node: a node process started (Detail "start") or the orchestrator saw it exit.
	Node Type = "node"
	// Note: anything else worth keeping (observer drops, store failures), in Detail.
	Note Type = "note"
)

// Outcome is a write's result as the load generator saw it.
type Outcome string

// The outcomes of a write.
const (
	Committed Outcome = "committed" // acknowledged: it must be handled
	Aborted   Outcome = "aborted"   // a transaction aborted on purpose: it must never be handled
	Uncertain Outcome = "uncertain" // an error: it may or may not have committed
)

// Op is a write's operation, as the change event names it.
type Op string

// The operations of the load.
const (
	Insert Op = "insert"
	Update Op = "update"
	Delete Op = "delete"
)

// Record is one line of a history. Only the fields of its Type are set.
type Record struct {
	Type     Type      `json:"type"`               // what the record describes
	Node     string    `json:"node,omitempty"`     // the node's InstanceName (stable over restarts)
	Instance string    `json:"instance,omitempty"` // the runtime's InstanceID (one per process run and runtime)
	Stream   string    `json:"stream,omitempty"`
	Mode     string    `json:"mode,omitempty"` // "single" or "all", on Call and Started records
	Key      string    `json:"key,omitempty"`
	Seq      int64     `json:"seq,omitempty"`
	Op       Op        `json:"op,omitempty"`
	Txn      bool      `json:"txn,omitempty"`
	Poison   bool      `json:"poison,omitempty"`
	Outcome  Outcome   `json:"outcome,omitempty"`
	EventID  string    `json:"event,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	Epoch    int64     `json:"epoch,omitempty"`
	Change   string    `json:"change,omitempty"`
	Owner    string    `json:"owner,omitempty"`
	Pos      string    `json:"pos,omitempty"`
	Kind     string    `json:"kind,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	Err      string    `json:"err,omitempty"`
	Terminal bool      `json:"terminal,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitzero"`
	Expires  time.Time `json:"expires,omitzero"`
}

// Writer appends records to a file, one write per record, safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	f  *os.File
	// err is the first write error; later records are dropped (the checker then finds
	// what is missing, and Err reports why).
	err error
}

// Create opens path for appending (creating it).
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{f: f}, nil
}

// Add appends r.
func (w *Writer) Add(r Record) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("history: encode %+v: %v", r, err)) // every field is marshalable
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if _, err := w.f.Write(b); err != nil {
		w.err = err
	}
}

// Err returns the first write error.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.f.Close()
	if w.err != nil {
		return w.err
	}
	return err
}

// Read decodes the records of r. A torn last line (a writer killed mid-write) is skipped;
// a bad line anywhere else is an error naming it.
func Read(r io.Reader, name string) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var pending error
	line := 0
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			pending = fmt.Errorf("history: %s:%d: %w", name, line, err)
			continue
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// ReadDir reads every *.jsonl file of dir and returns the records sorted by Start (stable).
func ReadDir(dir string) ([]Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var all []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		recs, err := Read(f, filepath.Base(p))
		f.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	Sort(all)
	return all, nil
}

// Sort orders records by Start, keeping the file order of equal times.
func Sort(recs []Record) {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Start.Before(recs[j].Start) })
}

// KeyOf is the checker's name of a write: "key#seq".
func KeyOf(key string, seq int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s#%d", key, seq)
	return b.String()
}
