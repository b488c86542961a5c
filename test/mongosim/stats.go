package mongosim

import (
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

func init() {
	registerCommand(kindRead, cmdValidate, "validate")
}

// statNum encodes a statistic as a server does (appendNumber): an int32 when it fits, else an
// int64, so that shells print plain numbers.
func statNum(n int64) any {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// storageStatsLocked is the storageStats document of $collStats (db.coll.stats()) for db.coll,
// sizes divided by scale: the committed documents' count and encoded size, and the indexes
// (whose sizes are not simulated: 0). local.oplog.rs is reported as the capped collection it
// is on a server, with max (OplogCapacity) and maxSize. Caller holds e.mu.
func (e *engine) storageStatsLocked(db, name string, scale int64) (bson.D, *cmdError) {
	if isOplogView(db, name) {
		n, size, maxSize := e.oplogStatsLocked()
		avg := int64(0)
		if n > 0 {
			avg = size / n
		}
		return bson.D{
			{Key: "size", Value: statNum(size / scale)}, {Key: "count", Value: statNum(n)}, {Key: "avgObjSize", Value: statNum(avg)},
			{Key: "numOrphanDocs", Value: statNum(int64(0))}, {Key: "storageSize", Value: statNum(size / scale)},
			{Key: "freeStorageSize", Value: statNum(int64(0))}, {Key: "capped", Value: true},
			{Key: "max", Value: statNum(int64(e.s.opts.OplogCapacity))}, {Key: "maxSize", Value: statNum(maxSize / scale)},
			{Key: "nindexes", Value: statNum(int64(0))}, {Key: "indexDetails", Value: bson.D{}},
			{Key: "indexBuilds", Value: bson.A{}}, {Key: "totalIndexSize", Value: statNum(int64(0))},
			{Key: "totalSize", Value: statNum(size / scale)}, {Key: "indexSizes", Value: bson.D{}},
			{Key: "scaleFactor", Value: statNum(scale)},
		}, nil
	}
	coll := e.collLocked(db, name)
	if coll == nil {
		return nil, errorf(codeNamespaceNotFound, "Unable to retrieve storageStats in $collStats stage :: caused by :: Collection [%s.%s] not found.", db, name)
	}
	n, size, indexes := collStatsLocked(coll)
	avg := int64(0)
	if n > 0 {
		avg = size / n
	}
	sizes := make(bson.D, 0, len(indexes))
	for _, ix := range indexes {
		sizes = append(sizes, bson.E{Key: ix, Value: statNum(int64(0))})
	}
	return bson.D{
		{Key: "size", Value: statNum(size / scale)}, {Key: "count", Value: statNum(n)}, {Key: "avgObjSize", Value: statNum(avg)},
		{Key: "numOrphanDocs", Value: statNum(int64(0))}, {Key: "storageSize", Value: statNum(size / scale)},
		{Key: "freeStorageSize", Value: statNum(int64(0))}, {Key: "capped", Value: false},
		{Key: "nindexes", Value: statNum(int64(len(indexes)))}, {Key: "indexDetails", Value: bson.D{}},
		{Key: "indexBuilds", Value: bson.A{}}, {Key: "totalIndexSize", Value: statNum(int64(0))},
		{Key: "totalSize", Value: statNum(size / scale)}, {Key: "indexSizes", Value: sizes},
		{Key: "scaleFactor", Value: statNum(scale)},
	}, nil
}

// collStatsStage runs $collStats: {storageStats: {scale}, count: {}, latencyStats: {},
// queryExecStats: {}} on the aggregate's collection and returns its one document. Latency and
// query statistics are not kept: they are reported as zero.
func collStatsStage(s *Server, c *command, spec any) ([]bson.D, error) {
	coll, ok := c.Body[0].Value.(string)
	if !ok || coll == "" {
		return nil, errorf(codeInvalidNamespace, "$collStats must be run against a collection namespace")
	}
	sd, ok := spec.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "$collStats must take a nested object but found: %s", typeName(spec))
	}
	out := bson.D{{Key: "ns", Value: c.DB + "." + coll}, {Key: "host", Value: s.addr},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(s.opts.Now())}}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range sd {
		opt, ok := f.Value.(bson.D)
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '$collStats.%s' is the wrong type '%s', expected type 'object'", f.Key, typeName(f.Value))
		}
		switch f.Key {
		case "storageStats":
			scale := int64(1)
			if v, ok := lookupD(opt, "scale"); ok {
				if scale, ok = asInt64(v); !ok || scale < 1 {
					return nil, errorf(codeBadValue, "BSON field 'scale' value must be >= 1, actual value '%v'", v)
				}
			}
			st, err := e.storageStatsLocked(c.DB, coll, scale)
			if err != nil {
				return nil, err
			}
			out = append(out, bson.E{Key: "storageStats", Value: st})
		case "count":
			var n int64
			if isOplogView(c.DB, coll) {
				n = int64(len(e.oplogViewLocked(&command{Name: "count"})))
			} else if cl := e.collLocked(c.DB, coll); cl != nil {
				n = int64(cl.count())
			} else {
				return nil, errorf(codeNamespaceNotFound, "Unable to retrieve count in $collStats stage :: caused by :: Collection [%s.%s] not found.", c.DB, coll)
			}
			out = append(out, bson.E{Key: "count", Value: bson.D{{Key: "count", Value: statNum(n)}}})
		case "latencyStats":
			zero := bson.D{{Key: "latency", Value: int64(0)}, {Key: "ops", Value: int64(0)}}
			out = append(out, bson.E{Key: "latencyStats", Value: bson.D{
				{Key: "reads", Value: zero}, {Key: "writes", Value: zero},
				{Key: "commands", Value: zero}, {Key: "transactions", Value: zero}}})
		case "queryExecStats":
			out = append(out, bson.E{Key: "queryExecStats", Value: bson.D{{Key: "collectionScans", Value: bson.D{
				{Key: "total", Value: int64(0)}, {Key: "nonTailable", Value: int64(0)}}}}})
		default:
			return nil, errorf(40415, "BSON field '$collStats.%s' is an unknown field.", f.Key)
		}
	}
	return []bson.D{out}, nil
}

// cmdValidate checks a collection's structures: the _id lookup table against the stored
// documents, every unique index's keys against the documents' keys (no missing and no extra
// entries), and the recorded data size against the documents' sizes. Problems are reported in
// errors with valid: false, as a server reports a corrupt collection.
func cmdValidate(s *Server, c *command) (bson.D, error) {
	name, ok := c.Body[0].Value.(string)
	if !ok || name == "" {
		return nil, errorf(codeInvalidNamespace, "collection name has invalid type %s", typeName(c.Body[0].Value))
	}
	for _, f := range c.Body[1:] {
		switch f.Key {
		case "full", "background", "repair", "metadata", "checkBSONConformance", "enforceFastCount":
			if _, ok := f.Value.(bool); !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'validate.%s' is the wrong type '%s', expected type 'bool'", f.Key, typeName(f.Value))
			}
			if f.Key == "repair" && f.Value.(bool) {
				return nil, unsupported("validate with repair")
			}
		}
	}
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	coll := e.collLocked(c.DB, name)
	if coll == nil {
		return nil, errorf(codeNamespaceNotFound, "Collection '%s.%s' does not exist to validate.", c.DB, name)
	}
	errs := bson.A{}
	var n, size int64
	unique := make([]int, len(coll.indexes)) // keys found per unique index
	coll.scanSlots(func(sl *docSlot) bool {
		n++
		size += int64(sl.size)
		if pos, ok := coll.byID[sl.key]; !ok || coll.docs[pos] != sl {
			errs = append(errs, fmt.Sprintf("document with _id %v is missing from the _id index", docID(sl.doc)))
		}
		keys, err := coll.indexKeysOf(sl.doc)
		if err != nil {
			errs = append(errs, fmt.Sprintf("document with _id %v: %s", docID(sl.doc), err.Msg))
			return true
		}
		for i, ks := range keys {
			for _, k := range ks {
				unique[i]++
				if coll.indexes[i].entries[k.hash] != sl.key {
					errs = append(errs, fmt.Sprintf("index %s is missing a key of the document with _id %v", coll.indexes[i].name, docID(sl.doc)))
				}
			}
		}
		return true
	})
	if int64(len(coll.order)) != n {
		errs = append(errs, fmt.Sprintf("the ordered _id index has %d entries for %d documents", len(coll.order), n))
	}
	for i, en := range coll.order {
		if _, ok := coll.byID[en.key]; !ok {
			errs = append(errs, fmt.Sprintf("the ordered _id index holds _id %v of no document", en.id))
		}
		if i > 0 && query.Compare(coll.order[i-1].id, en.id) >= 0 {
			errs = append(errs, fmt.Sprintf("the ordered _id index is out of order at _id %v", en.id))
		}
	}
	if int64(len(coll.byID)) != n {
		errs = append(errs, fmt.Sprintf("the _id index has %d entries for %d documents", len(coll.byID), n))
	}
	if size != coll.size {
		errs = append(errs, fmt.Sprintf("the recorded data size %d differs from the documents' %d bytes", coll.size, size))
	}
	keysPer := bson.D{}
	details := bson.D{}
	for i, ix := range coll.indexes {
		var keys int64
		switch {
		case ix.isID:
			keys = n
		case ix.unique:
			keys = int64(unique[i])
			if len(ix.entries) != unique[i] {
				errs = append(errs, fmt.Sprintf("index %s has %d entries for %d document keys", ix.name, len(ix.entries), unique[i]))
			}
		default:
			keys = n // not materialised: one key per document, as a single-field index has
		}
		keysPer = append(keysPer, bson.E{Key: ix.name, Value: keys})
		details = append(details, bson.E{Key: ix.name, Value: bson.D{{Key: "valid", Value: true}}})
	}
	return bson.D{
		{Key: "ns", Value: coll.ns()},
		{Key: "uuid", Value: coll.uuid},
		{Key: "nInvalidDocuments", Value: int64(0)},
		{Key: "nNonCompliantDocuments", Value: int64(0)},
		{Key: "nrecords", Value: n},
		{Key: "nIndexes", Value: int64(len(coll.indexes))},
		{Key: "keysPerIndex", Value: keysPer},
		{Key: "indexDetails", Value: details},
		{Key: "valid", Value: len(errs) == 0},
		{Key: "repaired", Value: false},
		{Key: "warnings", Value: bson.A{}},
		{Key: "errors", Value: errs},
		{Key: "extraIndexEntries", Value: bson.A{}},
		{Key: "missingIndexEntries", Value: bson.A{}},
		{Key: "corruptRecords", Value: bson.A{}},
	}, nil
}
