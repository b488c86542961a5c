package mongosim

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Values of the $changeStream fullDocument and fullDocumentBeforeChange options.
const (
	fullDocDefault       = "default"
	fullDocUpdateLookup  = "updateLookup"
	fullDocWhenAvailable = "whenAvailable"
	fullDocRequired      = "required"
	fullDocOff           = "off"
)

// expandedOps are the operation types a stream reports only with showExpandedEvents.
var expandedOps = map[string]bool{
	"create": true, "createIndexes": true, "dropIndexes": true, "modify": true,
	"shardCollection": true, "reshardCollection": true, "refineCollectionShardKey": true,
}

// streamScope is what a change stream watches.
type streamScope int

const (
	scopeCollection streamScope = iota // aggregate: "coll"
	scopeDatabase                      // aggregate: 1 on a database
	scopeCluster                       // aggregate: 1 on admin with allChangesForCluster
)

// streamFilter decides which oplog entries a stream turns into events and which end it.
type streamFilter struct {
	scope    streamScope
	db, coll string
	expanded bool // showExpandedEvents
}

// visible reports whether en becomes an event of the stream (before the user's pipeline).
func (f *streamFilter) visible(en *oplogEntry) bool {
	if en.op == noopOp || (expandedOps[en.op] && !f.expanded) {
		return false
	}
	switch f.scope {
	case scopeCollection:
		return en.db == f.db && en.coll == f.coll && en.op != "dropDatabase"
	case scopeDatabase:
		if en.db != f.db {
			return false
		}
		return en.op == "dropDatabase" || !strings.HasPrefix(en.coll, "system.")
	default:
		switch en.db {
		case "admin", "config", "local":
			return false
		}
		return en.op == "dropDatabase" || !strings.HasPrefix(en.coll, "system.")
	}
}

// inNamespace reports whether en's namespace is one the stream watches, whatever its kind:
// a token of an event outside it is never found by the stream.
func (f *streamFilter) inNamespace(en *oplogEntry) bool {
	switch f.scope {
	case scopeCollection:
		return en.db == f.db && en.coll == f.coll
	case scopeDatabase:
		return en.db == f.db
	default:
		return true
	}
}

// invalidates reports whether en ends the stream with an invalidate event: a drop or rename
// of a watched collection, or dropping a watched database. Cluster streams are never
// invalidated.
func (f *streamFilter) invalidates(en *oplogEntry) bool {
	switch f.scope {
	case scopeCollection:
		if en.db != f.db {
			return false
		}
		switch en.op {
		case "drop", "rename":
			return en.coll == f.coll
		case "dropDatabase":
			return true
		}
	case scopeDatabase:
		return en.op == "dropDatabase" && en.db == f.db
	}
	return false
}

// eventOptions are the $changeStream options that shape event documents.
type eventOptions struct {
	fullDocument        string // default, updateLookup, whenAvailable, required
	fullDocBeforeChange string // off, whenAvailable, required
	expanded            bool   // showExpandedEvents
}

// buildEvent turns an oplog entry into the change event document, with the fields in the
// order a real server emits them. current is the document's current version for
// fullDocument: updateLookup (nil when it is gone), looked up by the caller under e.mu.
// Errors: NoMatchingDocument (47) when a required post- or pre-image is missing.
func buildEvent(en *oplogEntry, opts *eventOptions, current bson.D) (bson.D, error) {
	ev := make(bson.D, 0, 12)
	ev = append(ev,
		bson.E{Key: "_id", Value: eventToken(en).doc()},
		bson.E{Key: "operationType", Value: en.op},
		bson.E{Key: "clusterTime", Value: en.ts},
		bson.E{Key: "wallTime", Value: bson.NewDateTimeFromTime(en.wall)},
	)
	isDocOp := false
	switch en.op {
	case "insert", "replace":
		isDocOp = true
		ev = append(ev, bson.E{Key: "fullDocument", Value: docOrNull(en.doc)})
	case "update":
		isDocOp = true
		switch opts.fullDocument {
		case fullDocUpdateLookup:
			ev = append(ev, bson.E{Key: "fullDocument", Value: docOrNull(current)})
		case fullDocWhenAvailable:
			ev = append(ev, bson.E{Key: "fullDocument", Value: docOrNull(en.post)})
		case fullDocRequired:
			if en.post == nil {
				return nil, errorf(codeNoMatchingDocument,
					"Change stream was configured to require a post-image for all update events, but the post-image was not found for event: %s",
					eventString(ev, en))
			}
			ev = append(ev, bson.E{Key: "fullDocument", Value: en.post})
		}
	case "delete":
		isDocOp = true
	}
	if en.op == "dropDatabase" {
		ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: en.db}}})
	} else {
		ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: en.db}, {Key: "coll", Value: en.coll}}})
	}
	if isDocOp {
		ev = append(ev, bson.E{Key: "documentKey", Value: en.docKey})
	}
	if en.op == "update" {
		ud := updateDescription(en.updateDesc)
		if opts.expanded {
			dp, err := disambiguatedPaths(en, current)
			if err != nil {
				return nil, err
			}
			ud = append(ud, bson.E{Key: "disambiguatedPaths", Value: dp})
		}
		ev = append(ev, bson.E{Key: "updateDescription", Value: ud})
	}
	if en.op == "update" || en.op == "replace" || en.op == "delete" {
		switch opts.fullDocBeforeChange {
		case fullDocWhenAvailable:
			ev = append(ev, bson.E{Key: "fullDocumentBeforeChange", Value: docOrNull(en.pre)})
		case fullDocRequired:
			if en.pre == nil {
				return nil, errorf(codeNoMatchingDocument,
					"Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: %s",
					eventString(ev, en))
			}
			ev = append(ev, bson.E{Key: "fullDocumentBeforeChange", Value: en.pre})
		}
	}
	if en.lsid != nil {
		ev = append(ev, bson.E{Key: "lsid", Value: en.lsid})
		if en.txnNumber != nil {
			ev = append(ev, bson.E{Key: "txnNumber", Value: *en.txnNumber})
		}
	}
	if en.op == "rename" {
		ev = append(ev, bson.E{Key: "to", Value: bson.D{{Key: "db", Value: en.toDB}, {Key: "coll", Value: en.toColl}}})
	}
	if opts.expanded {
		if en.op != "dropDatabase" && len(en.collUUID.Data) > 0 {
			ev = append(ev, bson.E{Key: "collectionUUID", Value: en.collUUID})
		}
		switch {
		case en.opDesc != nil:
			ev = append(ev, bson.E{Key: "operationDescription", Value: en.opDesc})
		case en.op == "rename":
			ev = append(ev, bson.E{Key: "operationDescription", Value: bson.D{
				{Key: "to", Value: bson.D{{Key: "db", Value: en.toDB}, {Key: "coll", Value: en.toColl}}}}})
		case expandedOps[en.op]:
			ev = append(ev, bson.E{Key: "operationDescription", Value: bson.D{}})
		}
	}
	return ev, nil
}

// buildInvalidate returns the invalidate event caused by en.
func buildInvalidate(en *oplogEntry) bson.D {
	return bson.D{
		{Key: "_id", Value: invalidateToken(en).doc()},
		{Key: "operationType", Value: "invalidate"},
		{Key: "clusterTime", Value: en.ts},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(en.wall)},
	}
}

// updateDescription normalises the oplog's update description: updatedFields, removedFields
// and truncatedArrays are always present, as on a real server.
func updateDescription(ud bson.D) bson.D {
	var updated, removed, truncated any
	for _, e := range ud {
		switch e.Key {
		case "updatedFields":
			updated = e.Value
		case "removedFields":
			removed = e.Value
		case "truncatedArrays":
			truncated = e.Value
		}
	}
	if updated == nil {
		updated = bson.D{}
	}
	if removed == nil {
		removed = bson.A{}
	}
	if truncated == nil {
		truncated = bson.A{}
	}
	return bson.D{{Key: "updatedFields", Value: updated}, {Key: "removedFields", Value: removed},
		{Key: "truncatedArrays", Value: truncated}}
}

// docOrNull returns d, or a BSON null when d is nil.
func docOrNull(d bson.D) any {
	if d == nil {
		return nil
	}
	return d
}

// eventString renders the event built so far (plus its documentKey) for error messages.
func eventString(ev bson.D, en *oplogEntry) string {
	d := append(bson.D(nil), ev...)
	if en.docKey != nil {
		d = append(d, bson.E{Key: "documentKey", Value: en.docKey})
	}
	b, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		return fmt.Sprint(d)
	}
	return string(b)
}

// updatePaths returns the dotted paths an update description names: updated and removed
// fields and truncated arrays.
func updatePaths(ud bson.D) []string {
	var paths []string
	for _, e := range ud {
		switch e.Key {
		case "updatedFields":
			if d, ok := e.Value.(bson.D); ok {
				for _, f := range d {
					paths = append(paths, f.Key)
				}
			}
		case "removedFields":
			if a, ok := e.Value.(bson.A); ok {
				for _, f := range a {
					if s, ok := f.(string); ok {
						paths = append(paths, s)
					}
				}
			}
		case "truncatedArrays":
			if a, ok := e.Value.(bson.A); ok {
				for _, t := range a {
					if d, ok := t.(bson.D); ok {
						if f, ok := lookupD(d, "field"); ok {
							if s, ok := f.(string); ok {
								paths = append(paths, s)
							}
						}
					}
				}
			}
		}
	}
	return paths
}

// hasAmbiguousPath reports whether an update description names a path with a numeric
// component, which may be an array index or a field name.
func hasAmbiguousPath(ud bson.D) bool {
	for _, p := range updatePaths(ud) {
		for _, c := range strings.Split(p, ".") {
			if isNumericComponent(c) {
				return true
			}
		}
	}
	return false
}

func isNumericComponent(c string) bool {
	if c == "" {
		return false
	}
	for _, r := range c {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// disambiguatedPaths builds updateDescription.disambiguatedPaths (showExpandedEvents): for each
// path with a numeric component, its components with array indexes as int32 and field names as
// strings. A description that already carries disambiguatedPaths (from the writer) is passed
// through. Otherwise the structure is read from the post-image, else from current (the
// document at read time); when neither exists the stream fails rather than guess.
func disambiguatedPaths(en *oplogEntry, current bson.D) (bson.D, error) {
	if v, ok := lookupD(en.updateDesc, "disambiguatedPaths"); ok {
		if d, ok := v.(bson.D); ok {
			return d, nil
		}
	}
	out := bson.D{}
	if !hasAmbiguousPath(en.updateDesc) {
		return out, nil
	}
	doc := en.post
	if doc == nil {
		doc = current
	}
	if doc == nil {
		return nil, unsupported("updateDescription.disambiguatedPaths for an update of a document that no longer exists (enable changeStreamPreAndPostImages on the collection)")
	}
	seen := map[string]bool{}
	for _, p := range updatePaths(en.updateDesc) {
		comps := strings.Split(p, ".")
		ambiguous := false
		for _, c := range comps {
			ambiguous = ambiguous || isNumericComponent(c)
		}
		if !ambiguous || seen[p] {
			continue
		}
		seen[p] = true
		var cur any = doc
		parts := make(bson.A, 0, len(comps))
		for _, c := range comps {
			switch v := cur.(type) {
			case bson.A:
				idx := 0
				if isNumericComponent(c) {
					fmt.Sscan(c, &idx)
					parts = append(parts, int32(idx))
					if idx < len(v) {
						cur = v[idx]
					} else {
						cur = nil
					}
					continue
				}
				parts = append(parts, c)
				cur = nil
			case bson.D:
				parts = append(parts, c)
				cur, _ = lookupD(v, c)
			default:
				parts = append(parts, c)
				cur = nil
			}
		}
		out = append(out, bson.E{Key: p, Value: parts})
	}
	return out, nil
}
