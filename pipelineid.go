package watchtree

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// idRule returns the rule a user stage breaks by removing or changing the event's _id, or "" when
// it keeps _id. The _id of a change event is its resume token: the server checks every event
// leaving the pipeline against the token it computed and fails the cursor with
// ChangeStreamFatalError 280 when they differ, which would crash the stream for good on its first
// event. Spawn refuses such a stage instead, naming it.
//
// The check is conservative but narrow: it looks only at the stages that reshape documents
// ($project, $unset, $addFields/$set, $replaceRoot/$replaceWith) and accepts only what provably
// keeps _id (an inclusion `_id: 1`, a no-op `_id: "$_id"`, a new root that ends by putting
// `_id: "$_id"` back). Other stages ($match and the like) pass through untouched.
func idRule(op string, v bson.RawValue) string {
	var touched string // what the stage does to _id, for the message
	switch op {
	case "$project":
		doc, ok := v.DocumentOK()
		if !ok {
			return ""
		}
		if key, ok := idChange(doc, true); ok {
			touched = fmt.Sprintf("projects %q", key)
			if key == "_id" && isFalse(doc.Lookup("_id")) {
				touched = "excludes _id"
			}
		}
	case "$unset":
		var fields []string
		if s, ok := v.StringValueOK(); ok {
			fields = []string{s}
		} else if a, ok := v.ArrayOK(); ok {
			vals, _ := a.Values()
			for _, f := range vals {
				if s, ok := f.StringValueOK(); ok {
					fields = append(fields, s)
				}
			}
		}
		for _, f := range fields {
			if isIDPath(f) {
				touched = fmt.Sprintf("removes %q", f)
				break
			}
		}
	case "$addFields", "$set":
		doc, ok := v.DocumentOK()
		if !ok {
			return ""
		}
		if key, ok := idChange(doc, false); ok {
			touched = fmt.Sprintf("sets %q", key)
		}
	case "$replaceRoot", "$replaceWith":
		root := v
		if op == "$replaceRoot" {
			doc, ok := v.DocumentOK()
			if !ok {
				return ""
			}
			root = doc.Lookup("newRoot")
		}
		if !rootKeepsID(root) {
			touched = "replaces the root without putting _id back unchanged (end the new root with {_id: \"$_id\"}, as in {$mergeObjects: [..., {_id: \"$_id\"}]})"
		}
	}
	if touched == "" {
		return ""
	}
	return fmt.Sprintf("must keep the event's _id unchanged: it is the resume token, which the server checks on every event (ChangeStreamFatalError 280 otherwise); this %s stage %s", op, touched)
}

// idChange returns the first key of doc, the document of a $project (inclusion true) or of an
// $addFields/$set, that changes _id: a path inside _id, or _id itself set to anything but what
// keepsID accepts. ok is false when no key touches _id.
func idChange(doc bson.Raw, inclusion bool) (key string, ok bool) {
	elems, _ := doc.Elements()
	for _, e := range elems {
		k := e.Key()
		if !isIDPath(k) || k == "_id" && keepsID(e.Value(), inclusion) {
			continue
		}
		return k, true
	}
	return "", false
}

// isIDPath reports whether path is _id or a field inside it.
func isIDPath(path string) bool { return path == "_id" || strings.HasPrefix(path, "_id.") }

// keepsID reports whether v, the value of _id in a $project (inclusion allowed) or an
// $addFields/$set (only the no-op "$_id"), leaves _id as it is.
func keepsID(v bson.RawValue, inclusion bool) bool {
	if s, ok := v.StringValueOK(); ok {
		return s == "$_id" || s == "$$ROOT._id" || s == "$$CURRENT._id"
	}
	if !inclusion {
		return false
	}
	switch v.Type {
	case bson.TypeBoolean:
		return v.Boolean()
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return !isFalse(v)
	}
	return false
}

// isFalse reports whether v is a projection's exclusion: false or a number equal to 0.
func isFalse(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeBoolean:
		return !v.Boolean()
	case bson.TypeInt32:
		return v.Int32() == 0
	case bson.TypeInt64:
		return v.Int64() == 0
	case bson.TypeDouble:
		return v.Double() == 0
	case bson.TypeDecimal128:
		return v.Decimal128().IsZero()
	}
	return false
}

// rootKeepsID reports whether the new root expression provably carries the event's _id: "$$ROOT",
// a document literal whose _id is "$_id", or a $mergeObjects whose last argument that can set
// _id does so with "$_id" (or is "$$ROOT"). Anything else (a field path such as "$fullDocument",
// whose _id is the document's, or an operator we cannot see through) is refused.
func rootKeepsID(root bson.RawValue) bool {
	if s, ok := root.StringValueOK(); ok {
		return s == "$$ROOT" || s == "$$CURRENT"
	}
	doc, ok := root.DocumentOK()
	if !ok {
		return false
	}
	elems, _ := doc.Elements()
	if len(elems) == 1 && elems[0].Key() == "$mergeObjects" {
		args, ok := elems[0].Value().ArrayOK()
		if !ok {
			return rootKeepsID(elems[0].Value())
		}
		vals, _ := args.Values()
		for i := len(vals) - 1; i >= 0; i-- {
			a := vals[i]
			if d, ok := a.DocumentOK(); ok && !isOperator(d) {
				id, err := d.LookupErr("_id")
				if err != nil {
					continue // this literal leaves _id to the arguments before it
				}
				return keepsID(id, false)
			}
			return rootKeepsID(a)
		}
		return false
	}
	if isOperator(doc) {
		return false
	}
	id, err := doc.LookupErr("_id")
	return err == nil && keepsID(id, false)
}

// isOperator reports whether doc is an expression operator ({$op: ...}) rather than a literal.
func isOperator(doc bson.Raw) bool {
	elems, _ := doc.Elements()
	return len(elems) == 1 && strings.HasPrefix(elems[0].Key(), "$")
}
