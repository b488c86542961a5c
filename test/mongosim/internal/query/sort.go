package query

import (
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// sortField is one compiled key of a sort specification.
type sortField struct {
	parts []string
	desc  bool
}

// compileSort validates a sort specification: every value must be 1 or -1
// (any numeric type); {$meta: ...} is reported as unsupported.
func compileSort(spec bson.D) ([]sortField, error) {
	fields := make([]sortField, 0, len(spec))
	for _, e := range spec {
		if e.Key == "" {
			return nil, errf(40352, "FieldPath cannot be constructed with empty string")
		}
		if strings.HasPrefix(e.Key, "$") {
			return nil, errf(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if d, ok := e.Value.(bson.D); ok {
			if len(d) > 0 && d[0].Key == "$meta" {
				return nil, errf(codeBadValue, "sort by {$meta: ...} on %q is not supported by mongosim", e.Key)
			}
			return nil, errf(17312, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		if !isNumber(e.Value) {
			return nil, errf(15974, "Illegal key in $sort specification: %s", e.Key)
		}
		var desc bool
		switch {
		case compareNumbers(e.Value, int32(1)) == 0:
		case compareNumbers(e.Value, int32(-1)) == 0:
			desc = true
		default:
			return nil, errf(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		fields = append(fields, sortField{parts: splitPath(e.Key), desc: desc})
	}
	return fields, nil
}

// sortKey is the value a document sorts by for one key. emptyArray marks a
// key taken from an empty array, which sorts below null (above MinKey).
type sortKey struct {
	v          any
	emptyArray bool
}

func compareSortKeys(a, b sortKey) int {
	switch {
	case a.emptyArray && b.emptyArray:
		return 0
	case a.emptyArray:
		if _, min := b.v.(bson.MinKey); min {
			return 1
		}
		return -1
	case b.emptyArray:
		return -compareSortKeys(b, a)
	}
	return Compare(a.v, b.v)
}

// docSortKey computes the key of doc for one sort field: the smallest
// (ascending) or largest (descending) value the path reaches, with arrays
// contributing their elements and missing values counting as null.
func docSortKey(doc bson.D, f sortField, col Collate) sortKey {
	var cands []sortKey
	for _, it := range pathItems(doc, f.parts, false) {
		switch {
		case it.missing:
			cands = append(cands, sortKey{v: nil})
		default:
			if arr, ok := it.v.(bson.A); ok {
				if len(arr) == 0 {
					cands = append(cands, sortKey{emptyArray: true})
				}
				for _, e := range arr {
					cands = append(cands, sortKey{v: CollateValue(e, col)})
				}
				continue
			}
			cands = append(cands, sortKey{v: CollateValue(it.v, col)})
		}
	}
	if len(cands) == 0 {
		return sortKey{v: nil}
	}
	best := cands[0]
	for _, c := range cands[1:] {
		cmp := compareSortKeys(c, best)
		if (!f.desc && cmp < 0) || (f.desc && cmp > 0) {
			best = c
		}
	}
	return best
}

// SortDocs sorts docs in place by spec (e.g. {a: 1, "b.c": -1}), stably, the
// way find's sort does: keys compare with Compare; an array sorts by its
// smallest element ascending and its largest descending; missing sorts as
// null; an empty array sorts below null. An empty spec leaves docs as they
// are. Invalid specs return an *Error and leave docs unchanged.
//
// {$natural: 1} alone keeps docs in their given (natural) order and
// {$natural: -1} reverses it; $natural combined with other keys is an error.
func SortDocs(docs []bson.D, spec bson.D) error { return SortDocsCollated(docs, spec, nil) }

// SortDocsCollated is SortDocs with strings compared under col (nil: binary).
func SortDocsCollated(docs []bson.D, spec bson.D, col Collate) error {
	if len(spec) > 0 && spec[0].Key == "$natural" {
		if len(spec) > 1 {
			return errf(codeBadValue, "$natural sort cannot be combined with other sort keys in mongosim")
		}
		switch {
		case isNumber(spec[0].Value) && compareNumbers(spec[0].Value, int32(1)) == 0:
		case isNumber(spec[0].Value) && compareNumbers(spec[0].Value, int32(-1)) == 0:
			for i, j := 0, len(docs)-1; i < j; i, j = i+1, j-1 {
				docs[i], docs[j] = docs[j], docs[i]
			}
		default:
			return errf(codeBadValue, "$natural sort direction must be 1 or -1")
		}
		return nil
	}
	fields, err := compileSort(spec)
	if err != nil || len(fields) == 0 || len(docs) < 2 {
		return err
	}
	type keyed struct {
		doc  bson.D
		keys []sortKey
	}
	ks := make([]keyed, len(docs))
	for i, d := range docs {
		ks[i].doc = d
		ks[i].keys = make([]sortKey, len(fields))
		for j, f := range fields {
			ks[i].keys[j] = docSortKey(d, f, col)
		}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		for k, f := range fields {
			c := compareSortKeys(ks[i].keys[k], ks[j].keys[k])
			if c == 0 {
				continue
			}
			if f.desc {
				return c > 0
			}
			return c < 0
		}
		return false
	})
	for i := range ks {
		docs[i] = ks[i].doc
	}
	return nil
}
