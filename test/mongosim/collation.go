package mongosim

import (
	"fmt"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/watchtree/watchtree/test/mongosim/internal/query"
)

// collation is a parsed, non-simple collation: its full specification (as a server reports
// it in listCollections and listIndexes) and the function mapping a string to its comparison
// key, computed with golang.org/x/text/collate (the Unicode Collation Algorithm with CLDR
// root data, which is what ICU applies for English).
type collation struct {
	spec bson.D
	id   string // canonical form of spec, to compare collations
	key  query.Collate
}

// icuVersion is the ICU version a MongoDB 8.0 server reports in a collation's "version".
const icuVersion = "57.1"

// collationLocales are the locales mongosim implements: those whose ICU collation is the
// root one. Other locales tailor the order (for example Swedish or German phonebook), which
// x/text's tables may not match exactly, so they are refused.
var collationLocales = map[string]bool{"en": true, "en_US": true, "en_GB": true, "en_CA": true, "en_AU": true}

// collators caches, per collation id, a pool of x/text collators: a Collator is not safe for
// concurrent use, and building one costs far more than a key.
var collators sync.Map // id -> *sync.Pool of *collate.Collator

// parseCollation reads a collation document. It returns nil for the simple collation
// ({locale: "simple"}); a locale or option mongosim does not implement fails with a
// "does not support" error naming it.
func parseCollation(v any) (*collation, *cmdError) {
	d, ok := v.(bson.D)
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'collation' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	locale := ""
	strength := int64(3)
	caseFirst, alternate, maxVariable := "off", "non-ignorable", "punct"
	var caseLevel, numeric, backwards, normalization bool
	hasLocale := false
	for _, f := range d {
		switch f.Key {
		case "locale":
			s, ok := f.Value.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'collation.locale' is the wrong type '%s', expected type 'string'", typeName(f.Value))
			}
			locale, hasLocale = s, true
		case "strength":
			n, ok := asInt64(f.Value)
			if !ok || n < 1 || n > 5 {
				return nil, errorf(codeBadValue, "Field 'strength' must be an integer 1 through 5. Got: %v", f.Value)
			}
			strength = n
		case "caseLevel", "numericOrdering", "backwards", "normalization":
			b, ok := f.Value.(bool)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type 'bool'", f.Key, typeName(f.Value))
			}
			switch f.Key {
			case "caseLevel":
				caseLevel = b
			case "numericOrdering":
				numeric = b
			case "backwards":
				backwards = b
			case "normalization":
				normalization = b
			}
		case "caseFirst", "alternate", "maxVariable":
			s, ok := f.Value.(string)
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type 'string'", f.Key, typeName(f.Value))
			}
			valid := map[string][]string{"caseFirst": {"upper", "lower", "off"}, "alternate": {"non-ignorable", "shifted"}, "maxVariable": {"punct", "space"}}[f.Key]
			if !slices.Contains(valid, s) {
				return nil, errorf(codeBadValue, "Enumeration value '%s' for field 'collation.%s' is not a valid value.", s, f.Key)
			}
			switch f.Key {
			case "caseFirst":
				caseFirst = s
			case "alternate":
				alternate = s
			case "maxVariable":
				maxVariable = s
			}
		case "version":
		default:
			return nil, errorf(40415, "BSON field 'collation.%s' is an unknown field.", f.Key)
		}
	}
	if !hasLocale {
		return nil, errorf(40414, "BSON field 'collation.locale' is missing but a required field")
	}
	if locale == "simple" {
		if len(d) > 1 {
			return nil, errorf(codeBadValue, "If 'locale' is set to 'simple', no other fields may be set")
		}
		return nil, nil
	}
	switch {
	case !collationLocales[locale]:
		return nil, unsupported("collation locale '%s' (only 'simple' and English: en, en_US, en_GB, en_CA, en_AU)", locale)
	case caseLevel:
		return nil, unsupported("collation option caseLevel: true")
	case caseFirst != "off":
		return nil, unsupported("collation option caseFirst: '%s'", caseFirst)
	case alternate != "non-ignorable":
		return nil, unsupported("collation option alternate: '%s'", alternate)
	case backwards:
		return nil, unsupported("collation option backwards: true")
	case strength > 3:
		return nil, unsupported("collation strength %d (quaternary and identical)", strength)
	}
	spec := bson.D{
		{Key: "locale", Value: locale}, {Key: "caseLevel", Value: caseLevel}, {Key: "caseFirst", Value: caseFirst},
		{Key: "strength", Value: int32(strength)}, {Key: "numericOrdering", Value: numeric},
		{Key: "alternate", Value: alternate}, {Key: "maxVariable", Value: maxVariable},
		{Key: "normalization", Value: normalization}, {Key: "backwards", Value: backwards},
		{Key: "version", Value: icuVersion},
	}
	tag := fmt.Sprintf("en-u-ks-level%d", strength)
	if numeric {
		tag += "-kn-true"
	}
	// en_US and the others collate as en; the id names the behaviour, not the locale.
	col := &collation{spec: spec, id: tag}
	t := language.MustParse(tag)
	poolV, _ := collators.LoadOrStore(tag, &sync.Pool{New: func() any { return collate.New(t) }})
	pool := poolV.(*sync.Pool)
	col.key = func(s string) string {
		c := pool.Get().(*collate.Collator)
		var buf collate.Buffer
		k := string(c.KeyFromString(&buf, s))
		pool.Put(c)
		return k
	}
	return col, nil
}

// keyFunc is the comparison-key function of col, nil for the simple collation.
func (col *collation) keyFunc() query.Collate {
	if col == nil {
		return nil
	}
	return col.key
}

// sameCollation reports whether two collations (nil: simple) compare alike.
func sameCollation(a, b *collation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.id == b.id
}

// commandCollation returns the collation a command (or statement) applies: its own collation
// argument when present (simple when {locale: "simple"}), else the collection's default.
// arg is the collation value (nil when absent).
func commandCollation(arg any, hasArg bool, dflt *collation) (*collation, *cmdError) {
	if !hasArg || arg == nil {
		return dflt, nil
	}
	return parseCollation(arg)
}

// defaultCollationLocked is the default collation of db.name (nil: simple or no collection).
// Caller holds e.mu.
func (e *engine) defaultCollationLocked(db, name string) *collation {
	if !e.collationsUsed.Load() {
		return nil
	}
	if coll := e.collLocked(db, name); coll != nil {
		return coll.collation
	}
	return nil
}

// readCollation is the collation a read command applies to db.coll: its collation argument,
// else the collection's default collation. Only when some collection has a default collation
// does it look at the catalog, so reads of binary-collated data pay nothing.
func (s *Server) readCollation(c *command, coll string) (*collation, error) {
	arg, has := c.Arg("collation")
	if has && arg != nil {
		col, err := parseCollation(arg)
		if err != nil {
			return nil, err
		}
		return col, nil
	}
	if !s.eng.collationsUsed.Load() {
		return nil, nil
	}
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	return s.eng.defaultCollationLocked(c.DB, coll), nil
}

// collatedEnv returns env with the collation a write statement applies to coll: its own
// collation argument, else coll's default. env itself when that is the simple collation.
func (w *writeCtx) collatedEnv(env *query.Env, coll *collection, arg any, has bool) (*query.Env, *cmdError) {
	var dflt *collation
	if coll != nil {
		dflt = coll.collation
	}
	if dflt == nil && (!has || arg == nil) {
		return env, nil // the common case: nothing to parse
	}
	col, err := commandCollation(arg, has, dflt)
	if err != nil || col == nil {
		return env, err
	}
	cp := *env
	cp.Collate = col.key
	return &cp, nil
}
