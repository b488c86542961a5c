package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file is the sink's default payload encoder: canonical Extended JSON of a bson.Raw in one
// pass over the bytes, appending to a []byte. It exists because bson.MarshalExtJSON goes
// through the driver's reflective value reader and writer, which made the payload encoder the
// larger part of a sink's cost per event (issue 41's benchmark target). Its output is byte for
// byte what bson.MarshalExtJSON(raw, true, false) returns, including the driver's quirks: the
// tests compare the two over a table of every type, generated documents and a fuzzer. It
// errors wherever the driver errors, and reads nested values the way the driver's value reader
// does (sequentially, checking a nested document's length only at its terminating byte), so
// that even a malformed nested document is refused or accepted exactly as the driver would.

// extjsonBufs holds scratch buffers for marshalExtJSON. Only the scratch buffer is pooled: the
// result is copied out, because a Publisher may keep Message.Payload after Publish returns.
var extjsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledExtJSON is the largest scratch buffer put back in the pool (bytes), so that one huge
// event does not pin its buffer for the life of the process.
const maxPooledExtJSON = 64 << 10

// marshalExtJSON returns the canonical Extended JSON of doc, as bson.MarshalExtJSON(doc, true,
// false) would: a newly allocated slice the caller may keep. A malformed doc is an error naming
// the byte offset and what is wrong there.
func marshalExtJSON(doc []byte) ([]byte, error) {
	bp := extjsonBufs.Get().(*[]byte)
	out, err := appendExtJSON((*bp)[:0], doc)
	var res []byte
	if err == nil {
		res = make([]byte, len(out))
		copy(res, out)
	}
	if cap(out) <= maxPooledExtJSON {
		*bp = out[:0]
		extjsonBufs.Put(bp)
	}
	return res, err
}

// extjsonString is marshalExtJSON as a string (the message key), with one allocation.
func extjsonString(doc []byte) (string, error) {
	bp := extjsonBufs.Get().(*[]byte)
	out, err := appendExtJSON((*bp)[:0], doc)
	var res string
	if err == nil {
		res = string(out)
	}
	if cap(out) <= maxPooledExtJSON {
		*bp = out[:0]
		extjsonBufs.Put(bp)
	}
	return res, err
}

// malformedBSON is the error for bytes that are not a BSON document the driver would encode.
func malformedBSON(off int, format string, args ...any) error {
	return fmt.Errorf("malformed BSON at byte %d: %s", off, fmt.Sprintf(format, args...))
}

// appendExtJSON appends the canonical Extended JSON of the BSON document doc to dst. The top
// level is read as the driver reads a bson.Raw: the declared length must be at least 5 and
// within doc (bytes after it are ignored), and each element's value must fit in the
// document by its type's length rule before it is decoded.
func appendExtJSON(dst, doc []byte) ([]byte, error) {
	if len(doc) < 4 {
		return dst, malformedBSON(0, "document of %d bytes has no length", len(doc))
	}
	length := int32(binary.LittleEndian.Uint32(doc))
	if length < 5 {
		return dst, malformedBSON(0, "document length %d is below the minimum of 5", length)
	}
	if int(length) > len(doc) {
		return dst, malformedBSON(0, "document length %d exceeds the %d bytes given", length, len(doc))
	}
	dst = append(dst, '{')
	off, end := 4, int(length)
	for n := 0; ; n++ {
		if off >= end {
			return dst, malformedBSON(off, "document ends without its terminating 0x00")
		}
		t := doc[off]
		off++
		if t == 0 {
			if off != end {
				return dst, malformedBSON(off-1, "terminating 0x00 before the document's declared end %d", end)
			}
			break
		}
		i := bytes.IndexByte(doc[off:end], 0)
		if i < 0 {
			return dst, malformedBSON(off, "element key without its terminating 0x00")
		}
		key := doc[off : off+i]
		off += i + 1
		vlen, ok := valueLength(doc[off:end], t)
		if !ok {
			return dst, malformedBSON(off, "value of type 0x%02x does not fit in the document", t)
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, key)
		dst = append(dst, ':')
		// The driver decodes each top-level value from exactly its own bytes: a read past
		// them is an error, bytes left unread are not.
		r := bsonReader{b: doc[off : off+vlen], base: off}
		var err error
		if dst, err = r.value(dst, t); err != nil {
			return dst, err
		}
		off += vlen
	}
	return append(dst, '}'), nil
}

// valueLength is the length of a value of type t at the start of src by the type's rule (the
// length prefix of length-prefixed types), and whether it is known, non-negative and fits.
func valueLength(src []byte, t byte) (int, bool) {
	var n int32
	switch t {
	case 0x03, 0x04, 0x0F, 0x05, 0x0C, 0x02, 0x0D, 0x0E: // length-prefixed
		if len(src) < 4 {
			return 0, false
		}
		if n = int32(binary.LittleEndian.Uint32(src)); n < 0 {
			return 0, false
		}
		// The fixed overhead beyond the prefix is added in int32, as the driver adds it: a
		// sum that wraps negative is refused below.
		switch t {
		case 0x05: // binary: subtype byte and the prefix itself
			n += 4 + 1
		case 0x0C: // DBPointer: string prefix and ObjectId
			n += 4 + 12
		case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol: the prefix
			n += 4
		}
	case 0x08:
		n = 1
	case 0x01, 0x09, 0x11, 0x12:
		n = 8
	case 0x13:
		n = 16
	case 0x10:
		n = 4
	case 0x06, 0x0A, 0x7F, 0xFF:
		n = 0
	case 0x07:
		n = 12
	case 0x0B: // regex: two C strings
		i := bytes.IndexByte(src, 0)
		if i < 0 {
			return 0, false
		}
		j := bytes.IndexByte(src[i+1:], 0)
		if j < 0 {
			return 0, false
		}
		return i + 1 + j + 1, true
	default:
		return 0, false
	}
	if n < 0 || int(n) > len(src) {
		return 0, false
	}
	return int(n), true
}

// bsonReader reads one top-level value sequentially, as the driver's value reader does:
// nested values are read one after another from the same bytes, a nested document's declared
// length is checked only when its terminating 0x00 is read, and reading past b is an error.
type bsonReader struct {
	b    []byte
	p    int // read position in b
	base int // offset of b in the whole document, for error messages
}

func (r *bsonReader) eof(what string) error {
	return malformedBSON(r.base+r.p, "%s runs past the end of its value", what)
}

func (r *bsonReader) take(n int, what string) ([]byte, error) {
	if n < 0 {
		return nil, malformedBSON(r.base+r.p, "%s has the negative length %d", what, n)
	}
	if n > len(r.b)-r.p {
		return nil, r.eof(what)
	}
	s := r.b[r.p : r.p+n]
	r.p += n
	return s, nil
}

func (r *bsonReader) i32(what string) (int32, error) {
	s, err := r.take(4, what)
	if err != nil {
		return 0, err
	}
	return int32(binary.LittleEndian.Uint32(s)), nil
}

func (r *bsonReader) u64(what string) (uint64, error) {
	s, err := r.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

func (r *bsonReader) cstring(what string) ([]byte, error) {
	i := bytes.IndexByte(r.b[r.p:], 0)
	if i < 0 {
		return nil, r.eof(what)
	}
	s := r.b[r.p : r.p+i]
	r.p += i + 1
	return s, nil
}

// str reads a BSON string: a length that counts the terminating 0x00, which must be there.
// Like the driver, it does not look for 0x00 inside: an inner one is text (escaped \u0000).
func (r *bsonReader) str(what string) ([]byte, error) {
	n, err := r.i32(what)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, malformedBSON(r.base+r.p-4, "%s has the invalid length %d", what, n)
	}
	s, err := r.take(int(n), what)
	if err != nil {
		return nil, err
	}
	if s[len(s)-1] != 0 {
		return nil, malformedBSON(r.base+r.p-1, "%s does not end with 0x00", what)
	}
	return s[:len(s)-1], nil
}

func (r *bsonReader) objectID(dst []byte) ([]byte, error) {
	id, err := r.take(12, "ObjectId")
	if err != nil {
		return dst, err
	}
	return hex.AppendEncode(dst, id), nil
}

// elements appends a document's (or array's) elements up to and including its terminating
// 0x00, which must be at position end-1. An array's keys are read and dropped.
func (r *bsonReader) elements(dst []byte, end int, array bool) ([]byte, error) {
	for n := 0; ; n++ {
		if r.p >= len(r.b) {
			return dst, r.eof("document")
		}
		t := r.b[r.p]
		r.p++
		if t == 0 {
			if r.p != end {
				return dst, malformedBSON(r.base+r.p-1, "terminating 0x00 of a nested document at %d, not at its declared end %d", r.base+r.p, r.base+end)
			}
			return dst, nil
		}
		key, err := r.cstring("element key")
		if err != nil {
			return dst, err
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		if !array {
			dst = appendJSONString(dst, key)
			dst = append(dst, ':')
		}
		if dst, err = r.value(dst, t); err != nil {
			return dst, err
		}
	}
}

// document appends a nested document or array: its length, elements and terminator.
func (r *bsonReader) document(dst []byte, array bool) ([]byte, error) {
	size, err := r.i32("document length")
	if err != nil {
		return dst, err
	}
	open, closing := byte('{'), byte('}')
	if array {
		open, closing = '[', ']'
	}
	dst = append(dst, open)
	if dst, err = r.elements(dst, r.p+int(size)-4, array); err != nil {
		return dst, err
	}
	return append(dst, closing), nil
}

// value appends the value of type t at the read position.
func (r *bsonReader) value(dst []byte, t byte) ([]byte, error) {
	switch t {
	case 0x01:
		u, err := r.u64("double")
		if err != nil {
			return dst, err
		}
		dst = append(dst, `{"$numberDouble":"`...)
		dst = appendDouble(dst, math.Float64frombits(u))
		return append(dst, `"}`...), nil
	case 0x02:
		s, err := r.str("string")
		if err != nil {
			return dst, err
		}
		return appendJSONString(dst, s), nil
	case 0x03:
		return r.document(dst, false)
	case 0x04:
		return r.document(dst, true)
	case 0x05:
		return r.binary(dst)
	case 0x06:
		return append(dst, `{"$undefined":true}`...), nil
	case 0x07:
		dst = append(dst, `{"$oid":"`...)
		dst, err := r.objectID(dst)
		if err != nil {
			return dst, err
		}
		return append(dst, `"}`...), nil
	case 0x08:
		s, err := r.take(1, "boolean")
		if err != nil {
			return dst, err
		}
		switch s[0] {
		case 0:
			return append(dst, "false"...), nil
		case 1:
			return append(dst, "true"...), nil
		}
		return dst, malformedBSON(r.base+r.p-1, "boolean byte 0x%02x is neither 0 nor 1", s[0])
	case 0x09:
		u, err := r.u64("datetime")
		if err != nil {
			return dst, err
		}
		return appendWrappedInt(dst, `{"$date":{"$numberLong":"`, int64(u), `"}}`), nil
	case 0x0A:
		return append(dst, "null"...), nil
	case 0x0B:
		return r.regex(dst)
	case 0x0C:
		ns, err := r.str("DBPointer namespace")
		if err != nil {
			return dst, err
		}
		// The driver writes the namespace unescaped; so do we, to stay byte-identical.
		dst = append(dst, `{"$dbPointer":{"$ref":"`...)
		dst = append(dst, ns...)
		dst = append(dst, `","$id":{"$oid":"`...)
		if dst, err = r.objectID(dst); err != nil {
			return dst, err
		}
		return append(dst, `"}}}`...), nil
	case 0x0D, 0x0E:
		what, wrap := "JavaScript code", `{"$code":`
		if t == 0x0E {
			what, wrap = "symbol", `{"$symbol":`
		}
		s, err := r.str(what)
		if err != nil {
			return dst, err
		}
		dst = append(dst, wrap...)
		dst = appendJSONString(dst, s)
		return append(dst, '}'), nil
	case 0x0F:
		return r.codeWithScope(dst)
	case 0x10:
		n, err := r.i32("int32")
		if err != nil {
			return dst, err
		}
		return appendWrappedInt(dst, `{"$numberInt":"`, int64(n), `"}`), nil
	case 0x11:
		u, err := r.u64("timestamp")
		if err != nil {
			return dst, err
		}
		// The increment is the low 4 bytes, the seconds the high 4.
		dst = append(dst, `{"$timestamp":{"t":`...)
		dst = strconv.AppendUint(dst, u>>32, 10)
		dst = append(dst, `,"i":`...)
		dst = strconv.AppendUint(dst, u&0xFFFFFFFF, 10)
		return append(dst, `}}`...), nil
	case 0x12:
		u, err := r.u64("int64")
		if err != nil {
			return dst, err
		}
		return appendWrappedInt(dst, `{"$numberLong":"`, int64(u), `"}`), nil
	case 0x13:
		s, err := r.take(16, "decimal128")
		if err != nil {
			return dst, err
		}
		// Decimal128 is rare in change events; its String is the driver's own formatting.
		d := bson.NewDecimal128(binary.LittleEndian.Uint64(s[8:]), binary.LittleEndian.Uint64(s[:8]))
		dst = append(dst, `{"$numberDecimal":"`...)
		dst = append(dst, d.String()...)
		return append(dst, `"}`...), nil
	case 0x7F:
		return append(dst, `{"$maxKey":1}`...), nil
	case 0xFF:
		return append(dst, `{"$minKey":1}`...), nil
	}
	return dst, malformedBSON(r.base+r.p, "unknown BSON type 0x%02x", t)
}

// appendWrappedInt appends n in decimal between open and closing.
func appendWrappedInt(dst []byte, open string, n int64, closing string) []byte {
	dst = append(dst, open...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, closing...)
}

// binary appends a binary value. Like the driver, subtype 0x02 (the old binary) with a length
// above 4 carries a second, inner length that says how many bytes follow.
func (r *bsonReader) binary(dst []byte) ([]byte, error) {
	n, err := r.i32("binary length")
	if err != nil {
		return dst, err
	}
	st, err := r.take(1, "binary subtype")
	if err != nil {
		return dst, err
	}
	sub := st[0]
	if sub == 0x02 && n > 4 {
		if n, err = r.i32("old binary inner length"); err != nil {
			return dst, err
		}
	}
	data, err := r.take(int(n), "binary")
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"$binary":{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	dst = append(dst, `","subType":"`...)
	dst = append(dst, hexDigits[sub>>4], hexDigits[sub&0xF])
	return append(dst, `"}}`...), nil
}

// regex appends a regular expression; its options are sorted, as the driver sorts them (by
// code point, after decoding them as UTF-8).
func (r *bsonReader) regex(dst []byte) ([]byte, error) {
	pattern, err := r.cstring("regex pattern")
	if err != nil {
		return dst, err
	}
	options, err := r.cstring("regex options")
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"$regularExpression":{"pattern":`...)
	dst = appendJSONString(dst, pattern)
	dst = append(dst, `,"options":`...)
	dst = appendJSONString(dst, sortedOptions(options))
	return append(dst, `}}`...), nil
}

func sortedOptions(o []byte) []byte {
	ascii := true
	for _, c := range o {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		if len(o) < 2 || slices.IsSorted(o) {
			return o
		}
		s := slices.Clone(o)
		slices.Sort(s)
		return s
	}
	// Decoding to runes turns each invalid byte into U+FFFD, which is then written as the
	// character itself: that is the driver's output too.
	rs := []rune(string(o))
	slices.Sort(rs)
	return []byte(string(rs))
}

// codeWithScope appends JavaScript code with its scope document. As in the driver, the code
// string's last byte is dropped without being checked to be 0x00, and the total length must
// equal the sum of its parts.
func (r *bsonReader) codeWithScope(dst []byte) ([]byte, error) {
	total, err := r.i32("code with scope length")
	if err != nil {
		return dst, err
	}
	n, err := r.i32("code with scope code length")
	if err != nil {
		return dst, err
	}
	if n <= 0 {
		return dst, malformedBSON(r.base+r.p-4, "code with scope has the invalid code length %d", n)
	}
	code, err := r.take(int(n), "code with scope code")
	if err != nil {
		return dst, err
	}
	size, err := r.i32("code with scope scope length")
	if err != nil {
		return dst, err
	}
	if int64(total) != int64(4+n+4)+int64(size) {
		return dst, malformedBSON(r.base+r.p-4, "code with scope length %d is not the sum of its parts (%d)", total, int64(4+n+4)+int64(size))
	}
	dst = append(dst, `{"$code":`...)
	dst = appendJSONString(dst, code[:len(code)-1])
	dst = append(dst, `,"$scope":{`...)
	if dst, err = r.elements(dst, r.p+int(size)-4, false); err != nil {
		return dst, err
	}
	return append(dst, `}}`...), nil
}

// appendDouble formats f as the driver does: strconv's shortest 'G' form, with ".0" added to
// an integral value that has neither an exponent nor a point, and Infinity, -Infinity, NaN.
func appendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'G', -1, 64)
	if bytes.IndexByte(dst[start:], 'E') < 0 && bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, ".0"...)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes written as they are inside a JSON string: every printable
// byte and DEL, but not '"' or '\\' (the driver's table with HTML escaping off).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a quoted JSON string, escaping as the driver does: '"' and
// '\\' with a backslash, \n \r \t \b \f by name, other control bytes as \u00XX, each byte of
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 as \u2028 and \u2029.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
