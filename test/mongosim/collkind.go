package mongosim

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// collKind holds what makes a collection other than a plain one: capped, clustered,
// time-series, or validated. A plain collection has none (collection.kind nil), so the write
// paths test one pointer.
type collKind struct {
	capped          bool
	cappedSize      int64 // bytes; the sum of the documents' BSON sizes is kept at or under it
	cappedMax       int64 // documents; 0 = no limit
	clustered       bool  // documents are kept, and scanned, in _id order
	timeField       string
	metaField       string
	validator       *validator    // validator.go; nil = none
	validationLevel string        // strict, moderate or off
	validationWarn  bool          // validationAction warn: failures are allowed
	tailWake        chan struct{} // capped: closed and replaced by each insert (tailable.go)
}

// kindOptionFields are the create options parseCollKind reads.
var kindOptionFields = map[string]bool{
	"capped": true, "size": true, "max": true, "clusteredIndex": true, "timeseries": true,
	"expireAfterSeconds": true, "validator": true, "validationLevel": true, "validationAction": true,
}

// parseCollKind reads the kind options of a create command (in command order) and returns the
// kind (nil for a plain collection) and the options as listCollections reports them.
func parseCollKind(fields bson.D) (*collKind, bson.D, *cmdError) {
	k := &collKind{validationLevel: "strict"}
	var opts bson.D
	var hasSize, hasMax, plain = false, false, true
	var size, max int64
	for _, f := range fields {
		switch f.Key {
		case "capped":
			k.capped = truthy(f.Value)
		case "size", "max":
			n, ok := asInt64(f.Value)
			if !ok {
				return nil, nil, errorf(codeTypeMismatch, "BSON field 'create.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", f.Key, typeName(f.Value))
			}
			if f.Key == "size" {
				size, hasSize = n, true
			} else {
				max, hasMax = n, true
			}
		case "clusteredIndex":
			spec, err := parseClusteredIndex(f.Value)
			if err != nil {
				return nil, nil, err
			}
			if spec != nil {
				k.clustered, plain = true, false
				opts = append(opts, bson.E{Key: "clusteredIndex", Value: spec})
			}
		case "timeseries":
			ts, err := k.parseTimeseries(f.Value)
			if err != nil {
				return nil, nil, err
			}
			plain = false
			opts = append(opts, bson.E{Key: "timeseries", Value: ts})
		case "expireAfterSeconds":
			return nil, nil, unsupported("expiring time-series and clustered collections (create option 'expireAfterSeconds')")
		case "validator":
			d, ok := f.Value.(bson.D)
			if !ok {
				return nil, nil, errorf(codeTypeMismatch, "BSON field 'create.validator' is the wrong type '%s', expected type 'object'", typeName(f.Value))
			}
			if len(d) == 0 {
				continue
			}
			v, err := compileValidator(d)
			if err != nil {
				return nil, nil, err
			}
			k.validator, plain = v, false
			opts = append(opts, f)
		case "validationLevel":
			s, _ := f.Value.(string)
			if s != "strict" && s != "moderate" && s != "off" {
				return nil, nil, errorf(codeBadValue, "Enumeration value '%v' for field 'validationLevel' is not a valid value.", f.Value)
			}
			k.validationLevel, plain = s, false
			opts = append(opts, f)
		case "validationAction":
			s, _ := f.Value.(string)
			if s != "error" && s != "warn" {
				return nil, nil, errorf(codeBadValue, "Enumeration value '%v' for field 'validationAction' is not a valid value.", f.Value)
			}
			k.validationWarn, plain = s == "warn", false
			opts = append(opts, f)
		}
	}
	if k.capped {
		if !hasSize {
			return nil, nil, errorf(codeInvalidOptions, "the 'size' field is required when 'capped' is true")
		}
		if size <= 0 {
			return nil, nil, errorf(codeInvalidOptions, "the 'size' field must be greater than zero when 'capped' is true")
		}
		if k.clustered || k.timeField != "" {
			return nil, nil, errorf(codeInvalidOptions, "capped collections cannot be clustered or time-series")
		}
		// As on a server: at least 4096 bytes, else raised to a multiple of 256.
		k.cappedSize, plain = size, false
		k.tailWake = make(chan struct{})
		if k.cappedSize <= 4096 {
			k.cappedSize = 4096
		} else if r := k.cappedSize % 256; r != 0 {
			k.cappedSize += 256 - r
		}
		capOpts := bson.D{{Key: "capped", Value: true}, {Key: "size", Value: size}}
		if hasMax && max > 0 {
			k.cappedMax = max
			capOpts = append(capOpts, bson.E{Key: "max", Value: max})
		}
		opts = append(capOpts, opts...)
	}
	if k.clustered && k.timeField != "" {
		return nil, nil, errorf(codeInvalidOptions, "time-series collections cannot take a clusteredIndex option")
	}
	if plain {
		return nil, opts, nil
	}
	return k, opts, nil
}

// parseClusteredIndex reads clusteredIndex: {key: {_id: 1}, unique: true, name?, v?}, or a
// boolean false (none). It returns the spec listCollections reports.
func parseClusteredIndex(v any) (bson.D, *cmdError) {
	if b, ok := v.(bool); ok {
		if b {
			return nil, unsupported("clusteredIndex: true (the legacy form of clustered collections)")
		}
		return nil, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'clusteredIndex' is the wrong type '%s', expected types '[bool, object]'", typeName(v))
	}
	name := "_id_"
	var key bson.D
	unique, hasUnique := false, false
	for _, f := range d {
		switch f.Key {
		case "key":
			key, _ = f.Value.(bson.D)
		case "unique":
			unique, hasUnique = truthy(f.Value), true
		case "name":
			if s, ok := f.Value.(string); ok {
				name = s
			}
		case "v":
		default:
			return nil, errorf(40415, "BSON field 'clusteredIndex.%s' is an unknown field.", f.Key)
		}
	}
	if key == nil {
		return nil, errorf(40414, "BSON field 'clusteredIndex.key' is missing but a required field")
	}
	if !hasUnique {
		return nil, errorf(40414, "BSON field 'clusteredIndex.unique' is missing but a required field")
	}
	if n, ok := asInt64(firstValue(key)); len(key) != 1 || key[0].Key != "_id" || !ok || n != 1 {
		return nil, errorf(codeInvalidOptions, "The clusteredIndex option is only supported for key: {_id: 1}")
	}
	if !unique {
		return nil, errorf(codeInvalidOptions, "The clusteredIndex option requires unique: true")
	}
	return bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}},
		{Key: "name", Value: name}, {Key: "unique", Value: true}}, nil
}

func firstValue(d bson.D) any {
	if len(d) == 0 {
		return nil
	}
	return d[0].Value
}

// parseTimeseries reads timeseries: {timeField, metaField?, granularity?, bucketMaxSpanSeconds?,
// bucketRoundingSeconds?} and returns the full spec a server reports.
func (k *collKind) parseTimeseries(v any) (bson.D, *cmdError) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'create.timeseries' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	granularity := ""
	var span int64
	for _, f := range d {
		switch f.Key {
		case "timeField", "metaField", "granularity":
			s, ok := f.Value.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'timeseries.%s' is the wrong type '%s', expected type 'string'", f.Key, typeName(f.Value))
			}
			switch f.Key {
			case "timeField":
				k.timeField = s
			case "metaField":
				k.metaField = s
			default:
				if s != "seconds" && s != "minutes" && s != "hours" {
					return nil, errorf(codeBadValue, "Enumeration value '%s' for field 'timeseries.granularity' is not a valid value.", s)
				}
				granularity = s
			}
		case "bucketMaxSpanSeconds", "bucketRoundingSeconds":
			n, ok := asInt64(f.Value)
			if !ok || n < 1 {
				return nil, errorf(codeBadValue, "BSON field 'timeseries.%s' must be a positive number", f.Key)
			}
			if f.Key == "bucketMaxSpanSeconds" {
				span = n
			}
		default:
			return nil, errorf(40415, "BSON field 'timeseries.%s' is an unknown field.", f.Key)
		}
	}
	if k.timeField == "" {
		return nil, errorf(40414, "BSON field 'timeseries.timeField' is missing but a required field")
	}
	if k.metaField == k.timeField || k.metaField == "_id" {
		return nil, errorf(codeBadValue, "The 'metaField' cannot be '_id' or the same as the 'timeField'")
	}
	spans := map[string]int64{"seconds": 3600, "minutes": 86400, "hours": 2592000}
	if granularity == "" && span == 0 {
		granularity = "seconds"
	}
	if span == 0 {
		span = spans[granularity]
	}
	ts := bson.D{{Key: "timeField", Value: k.timeField}}
	if k.metaField != "" {
		ts = append(ts, bson.E{Key: "metaField", Value: k.metaField})
	}
	if granularity != "" {
		ts = append(ts, bson.E{Key: "granularity", Value: granularity})
	}
	return append(ts, bson.E{Key: "bucketMaxSpanSeconds", Value: int32(span)}), nil
}

// checkInsertKind checks a document about to be inserted into a collection of kind k:
// time-series documents need their time field as a date; validated collections their
// validator.
func (w *writeCtx) checkInsertKind(coll *collection, doc bson.D) *cmdError {
	k := coll.kind
	if k.capped && w.txn != nil {
		return errorf(codeOperationNotSupportedInTransaction, "Collection '%s' is a capped collection. Writes in transactions are not allowed on capped collections.", coll.ns())
	}
	if k.timeField != "" {
		if t, ok := lookupD(doc, k.timeField); !ok || !isDate(t) {
			return errorf(codeBadValue, "'%s' must be present and contain a valid BSON UTC datetime value", k.timeField)
		}
	}
	return w.validate(coll, doc, nil)
}

func isDate(v any) bool {
	_, ok := v.(bson.DateTime)
	return ok
}

// trimCapped removes the oldest documents of a capped collection until it is within its size
// and document count, logging each removal as a delete (as a server replicates them since 5.0).
// The newest document always stays.
func (w *writeCtx) trimCapped(coll *collection) {
	k := coll.kind
	for coll.count() > 1 && (coll.size > k.cappedSize || (k.cappedMax > 0 && int64(coll.count()) > k.cappedMax)) {
		var oldest *docSlot
		coll.scanSlots(func(s *docSlot) bool { oldest = s; return false })
		if oldest == nil {
			return
		}
		_ = w.deleteDoc(coll, oldest)
	}
}

// kindCollectionInfo adjusts the listCollections document of a collection of kind k.
func kindCollectionInfo(coll *collection, info bson.D) bson.D {
	if coll.kind == nil || coll.kind.timeField == "" {
		return info
	}
	out := make(bson.D, 0, len(info))
	for _, f := range info {
		switch f.Key {
		case "type":
			f.Value = "timeseries"
		case "idIndex":
			continue // a time-series collection has no _id index
		case "info":
			f.Value = bson.D{{Key: "readOnly", Value: false}}
		}
		out = append(out, f)
	}
	return out
}

// setKind makes coll a collection of kind k (nil: plain). A clustered collection's _id index
// is its clustered index, which listIndexes reports as such.
func (coll *collection) setKind(k *collKind) {
	coll.kind = k
	if k != nil && k.clustered {
		ix := *coll.indexes[0]
		ix.spec = bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}},
			{Key: "name", Value: "_id_"}, {Key: "unique", Value: true}, {Key: "clustered", Value: true}}
		for _, o := range coll.options {
			if o.Key == "clusteredIndex" {
				if name, ok := lookupD(o.Value.(bson.D), "name"); ok {
					ix.name = name.(string)
					ix.spec[2].Value = ix.name
				}
			}
		}
		coll.indexes[0] = &ix
	}
}

// isCapped reports whether db.name is a capped collection.
func (e *engine) isCapped(db, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	coll := e.collLocked(db, name)
	return coll != nil && coll.kind != nil && coll.kind.capped
}

// modifyValidation applies collMod's validator, validationLevel and validationAction: the
// kind is replaced (kinds are shared by transaction views), and the options listCollections
// reports are updated. On error nothing changes. Caller holds e.mu.
func (coll *collection) modifyValidation(mods bson.D) *cmdError {
	k := collKind{validationLevel: "strict"}
	if coll.kind != nil {
		k = *coll.kind
	}
	for _, f := range mods {
		parsed, _, err := parseCollKind(bson.D{f})
		if err != nil {
			return err
		}
		switch f.Key {
		case "validator":
			k.validator = nil
			if parsed != nil {
				k.validator = parsed.validator
			}
		case "validationLevel":
			if parsed != nil {
				k.validationLevel = parsed.validationLevel
			}
		case "validationAction":
			k.validationWarn = parsed != nil && parsed.validationWarn
		}
	}
	opts := make(bson.D, 0, len(coll.options)+len(mods))
	for _, o := range coll.options {
		keep := true
		for _, m := range mods {
			if m.Key == o.Key {
				keep = false
			}
		}
		if keep {
			opts = append(opts, o)
		}
	}
	for _, m := range mods {
		if d, ok := m.Value.(bson.D); m.Key == "validator" && ok && len(d) == 0 {
			continue
		}
		opts = append(opts, m)
	}
	coll.options = opts
	coll.kind = &k
	return nil
}
