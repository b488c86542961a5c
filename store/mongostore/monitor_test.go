package mongostore_test

import (
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// sent is one command the client sent, with its reply (nil when it failed).
type sent struct {
	Name    string
	Command bson.Raw
	Reply   bson.Raw
	Err     string
}

// recorder records the commands a client sends, by request ID.
type recorder struct {
	mu      sync.Mutex
	pending map[int64]bson.Raw
	done    []sent
}

// option installs r on a client.
func (r *recorder) option(o *options.ClientOptions) {
	r.pending = make(map[int64]bson.Raw)
	o.SetMonitor(&event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.pending[e.RequestID] = append(bson.Raw(nil), e.Command...)
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			r.finish(e.RequestID, e.CommandName, append(bson.Raw(nil), e.Reply...), "")
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			r.finish(e.RequestID, e.CommandName, nil, e.Failure.Error())
		},
	})
}

func (r *recorder) finish(id int64, name string, reply bson.Raw, err string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, sent{Name: name, Command: r.pending[id], Reply: reply, Err: err})
	delete(r.pending, id)
}

// named returns the finished commands called name, oldest first.
func (r *recorder) named(name string) []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sent
	for _, s := range r.done {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// reset forgets everything recorded so far.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = nil
}
