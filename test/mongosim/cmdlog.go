package mongosim

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// commandLogSize bounds the command log; older records are dropped first.
const commandLogSize = 10_000

// CommandRecord is one command the server received, for assertions in tests.
type CommandRecord struct {
	Time     time.Time     // when the command arrived
	Duration time.Duration // until its reply was ready
	ConnID   int32         // the connectionId hello reported on that connection
	AppName  string        // the client's appName, if it set one
	DB       string        // $db
	Name     string        // command name as sent
	Body     bson.D        // the command, with kind-1 sequences merged in; do not modify
	Err      error         // nil on success; a failure reply or a dropped connection otherwise
	Code     int32         // the error code sent, 0 on success or a dropped connection
	Labels   []string      // the errorLabels sent (on an error, or with a writeConcernError)
}

// commandLog keeps the most recent commandLogSize records in a ring.
type commandLog struct {
	mu      sync.Mutex
	records []CommandRecord
	next    int
	full    bool
}

func (l *commandLog) record(c *command, start time.Time, err error, code int32, labels []string) {
	r := CommandRecord{Time: start, Duration: time.Since(start), ConnID: c.conn.id,
		AppName: c.conn.application(), DB: c.DB, Name: c.Name, Body: c.Body, Err: err,
		Code: code, Labels: labels}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.records) < commandLogSize {
		l.records = append(l.records, r)
		return
	}
	l.records[l.next] = r
	l.next = (l.next + 1) % commandLogSize
	l.full = true
}

// Commands returns the logged commands, oldest first (at most the last 10,000).
func (s *Server) Commands() []CommandRecord {
	l := &s.cmdLog
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.full {
		return append([]CommandRecord(nil), l.records...)
	}
	out := make([]CommandRecord, 0, len(l.records))
	out = append(out, l.records[l.next:]...)
	return append(out, l.records[:l.next]...)
}

// CommandsNamed returns the logged commands with the given name, oldest first.
func (s *Server) CommandsNamed(name string) []CommandRecord {
	var out []CommandRecord
	for _, r := range s.Commands() {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// ResetCommands empties the command log.
func (s *Server) ResetCommands() {
	l := &s.cmdLog
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records, l.next, l.full = nil, 0, false
}
