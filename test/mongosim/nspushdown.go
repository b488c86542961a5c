package mongosim

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// nsPushdown is the namespace part of a change stream's leading $match, checked in the oplog
// scan so that an entry whose event the $match would drop is never built. A real server
// rewrites such a $match into its oplog filter. Without it, a database stream opened with
// {$match: {"ns.coll": {$in: [...]}}} (watchtree's shared-cursor hub) built every event of the
// database and ran the generic $match on each, and cost 1.3× a collection stream per event
// (issue 38), where a collection stream filters by namespace before building anything.
//
// Only forms whose outcome on an event is certain are recognised, on the paths "ns.coll",
// "ns.db" and "ns": a literal, {$eq: literal} or {$in: [literals]}, where a literal is a string
// (for "ns", a document {db: string} or {db: string, coll: string}, in that order) or null.
// The top-level fields of a $match are ANDed, so each recognised condition is necessary for the
// stage to keep the event. When the $match is exactly one such condition it is also sufficient:
// the stage is then covered and is dropped from the pipeline, so the stream runs no generic
// pipeline at all when that was its only stage (as a collection stream).
type nsPushdown struct {
	conds   []nsCond
	covered bool
}

// nsCond is one condition on an event's namespace: the values of its path that match.
type nsCond struct {
	path string          // "ns.coll", "ns.db" or "ns"
	vals map[string]bool // the strings that match (for "ns": nsKey of each document)
	null bool            // null is among them: a missing field matches
}

// nsKey is the map key of an ns document {db, coll} (hasColl) or {db}. Names hold no NUL.
func nsKey(db, coll string, hasColl bool) string {
	if !hasColl {
		return db + "\x00"
	}
	return db + "\x00" + coll + "\x00"
}

// parseNSPushdown returns the pushdown of the first of the stages after $changeStream, or nil
// when that is not a $match with a recognised namespace condition. The stages have already
// been compiled, so their syntax is valid.
//
// A $match with any top-level operator ($expr, $and, $where, …) gets no pushdown: such an
// expression may fail at evaluation, and an event skipped in the scan would then hide an error
// the stream returns today.
func parseNSPushdown(stages bson.A) *nsPushdown {
	if len(stages) == 0 {
		return nil
	}
	st, ok := stages[0].(bson.D)
	if !ok || len(st) != 1 || st[0].Key != "$match" {
		return nil
	}
	filter, ok := st[0].Value.(bson.D)
	if !ok || len(filter) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(filter))
	var p nsPushdown
	for _, el := range filter {
		if strings.HasPrefix(el.Key, "$") || seen[el.Key] {
			return nil // a duplicate field: which one the matcher applies is not ours to guess
		}
		seen[el.Key] = true
		switch el.Key {
		case "ns.coll", "ns.db", "ns":
			if c, ok := parseNSCond(el.Key, el.Value); ok {
				p.conds = append(p.conds, c)
			}
		}
	}
	if len(p.conds) == 0 {
		return nil
	}
	p.covered = len(filter) == 1
	return &p
}

// parseNSCond parses the condition on path, if it has a recognised form.
func parseNSCond(path string, v any) (nsCond, bool) {
	c := nsCond{path: path, vals: map[string]bool{}}
	if d, ok := v.(bson.D); ok && len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 {
			return c, false
		}
		switch d[0].Key {
		case "$eq":
			return c, c.add(d[0].Value)
		case "$in":
			arr, ok := d[0].Value.(bson.A)
			if !ok {
				return c, false
			}
			for _, x := range arr {
				if !c.add(x) {
					return c, false
				}
			}
			return c, true
		}
		return c, false
	}
	return c, c.add(v)
}

// add records the literal v as a matching value; false when v is not a recognised literal.
func (c *nsCond) add(v any) bool {
	if v == nil {
		c.null = true
		return true
	}
	if c.path != "ns" {
		s, ok := v.(string)
		if ok {
			c.vals[s] = true
		}
		return ok
	}
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || len(d) > 2 || d[0].Key != "db" {
		return false
	}
	db, ok := d[0].Value.(string)
	if !ok {
		return false
	}
	if len(d) == 1 {
		c.vals[nsKey(db, "", false)] = true
		return true
	}
	coll, ok := d[1].Value.(string)
	if !ok || d[1].Key != "coll" {
		return false
	}
	c.vals[nsKey(db, coll, true)] = true
	return true
}

// admits reports whether the $match may keep an event whose ns is {db, coll} (hasColl),
// {db} (!hasColl), or absent (!hasNS, an invalidate event). It must agree with the ns field
// buildEvent and buildInvalidate write.
func (p *nsPushdown) admits(db, coll string, hasNS, hasColl bool) bool {
	hasColl = hasColl && hasNS
	for i := range p.conds {
		c := &p.conds[i]
		var ok bool
		switch c.path {
		case "ns.coll":
			ok = c.null
			if hasColl {
				ok = c.vals[coll]
			}
		case "ns.db":
			ok = c.null
			if hasNS {
				ok = c.vals[db]
			}
		default: // "ns"
			ok = c.null
			if hasNS {
				ok = c.vals[nsKey(db, coll, hasColl)]
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// admitsEntry is admits for the event buildEvent makes of en: dropDatabase has ns {db}.
func (p *nsPushdown) admitsEntry(en *oplogEntry) bool {
	return p.admits(en.db, en.coll, true, en.op != "dropDatabase")
}

// mayFailToBuild reports whether buildEvent can fail for en under opts (a required pre- or
// post-image, disambiguatedPaths). Such an event is still built when the pushdown rejects it,
// then dropped: its error is returned today whatever the $match says, and still is.
func mayFailToBuild(en *oplogEntry, opts *eventOptions) bool {
	switch en.op {
	case "update":
		return opts.fullDocument == fullDocRequired || opts.fullDocBeforeChange == fullDocRequired ||
			(opts.expanded && hasAmbiguousPath(en.updateDesc))
	case "replace", "delete":
		return opts.fullDocBeforeChange == fullDocRequired
	}
	return false
}
