package stream

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// errSplitEvent is the cause (in the failure's text: causes reach the actor as text) of a
// reader failure on fragments of a split change event
// ($changeStreamSplitLargeEvent) that do not follow each other: a fragment other than the
// first without the ones before it, or a new event starting before the last one was complete.
// The stream restarts from its checkpoint, which never points inside a split event.
var errSplitEvent = errors.New("stream: fragments of a split change event out of sequence")

// splitInfo reads a splitEvent value {fragment, of}.
func splitInfo(v bson.RawValue) (fragment, of int32, err error) {
	d, isDoc := v.DocumentOK()
	if !isDoc {
		return 0, 0, fmt.Errorf("%w: splitEvent is a %s, not a document", errSplitEvent, v.Type)
	}
	f, ferr := d.LookupErr("fragment")
	n, nerr := d.LookupErr("of")
	fi, fok := f.AsInt64OK()
	ni, nok := n.AsInt64OK()
	if ferr != nil || nerr != nil || !fok || !nok || fi < 1 || ni < fi || ni > 1<<20 {
		return 0, 0, fmt.Errorf("%w: bad splitEvent %s", errSplitEvent, d)
	}
	return int32(fi), int32(ni), nil
}

// reassembly collects the fragments of one split change event, in order. It is owned by the
// reader goroutine and survives from one read round to the next (a fragment arrives per
// getMore), never from one cursor to the next: a new cursor resumes from a position outside any
// split event.
type reassembly struct {
	parts []bson.Raw
	of    int32
	size  int
}

// pending reports whether fragments are held that do not make a whole event yet.
func (a *reassembly) pending() bool { return len(a.parts) > 0 }

// add takes the next fragment; once the last one is in it returns the whole event: the
// top-level fields of every fragment, in order, under the _id (resume token) of the last
// fragment, without splitEvent. That token is the event's position: resuming after it
// continues with the next event.
func (a *reassembly) add(raw bson.Raw, fragment, of int32) (bson.Raw, error) {
	want := int32(len(a.parts)) + 1
	if fragment != want || (a.pending() && of != a.of) {
		held := fmt.Sprintf("%d of %d held", len(a.parts), a.of)
		if !a.pending() {
			held = "none held"
		}
		a.reset()
		return nil, fmt.Errorf("%w: got fragment %d of %d, %s", errSplitEvent, fragment, of, held)
	}
	a.parts = append(a.parts, raw)
	a.of = of
	a.size += len(raw)
	if fragment < of {
		return nil, nil
	}
	whole, err := mergeFragments(a.parts, a.size)
	a.reset()
	return whole, err
}

func (a *reassembly) reset() { a.parts, a.of, a.size = nil, 0, 0 }

// mergeFragments builds the whole event from its fragments.
func mergeFragments(parts []bson.Raw, size int) (bson.Raw, error) {
	last := parts[len(parts)-1]
	id, err := last.LookupErr("_id")
	if err != nil {
		return nil, fmt.Errorf("%w: the last fragment has no _id", errSplitEvent)
	}
	out := make([]byte, 4, size)
	out = append(out, byte(id.Type))
	out = append(out, "_id\x00"...)
	out = append(out, id.Value...)
	for _, p := range parts {
		elems, err := p.Elements()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errSplitEvent, err)
		}
		for _, e := range elems {
			switch e.Key() {
			case "_id", "splitEvent":
				continue
			}
			out = append(out, e...)
		}
	}
	out = append(out, 0)
	n := len(out)
	out[0], out[1], out[2], out[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return bson.Raw(out), nil
}
