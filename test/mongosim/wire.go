package mongosim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Opcodes of the MongoDB wire protocol that the simulator reads or writes.
const (
	opReply = 1
	opQuery = 2004
	opMsg   = 2013
)

// OP_MSG flag bits.
const (
	msgChecksumPresent = 1 << 0
	msgMoreToCome      = 1 << 1
	msgExhaustAllowed  = 1 << 16
)

const (
	maxBSONSize    = 16 * 1024 * 1024
	maxMessageSize = 48_000_000
	maxWriteBatch  = 100_000
)

var errMalformed = errors.New("malformed wire message")

type msgHeader struct {
	length     int32
	requestID  int32
	responseTo int32
	opCode     int32
}

// readMessage reads one whole wire message and returns its header and the bytes after it.
func readMessage(r io.Reader, buf []byte) (msgHeader, []byte, error) {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return msgHeader{}, nil, err
	}
	h := msgHeader{
		length:     int32(binary.LittleEndian.Uint32(hdr[0:])),
		requestID:  int32(binary.LittleEndian.Uint32(hdr[4:])),
		responseTo: int32(binary.LittleEndian.Uint32(hdr[8:])),
		opCode:     int32(binary.LittleEndian.Uint32(hdr[12:])),
	}
	if h.length < 16 || h.length > maxMessageSize {
		return h, nil, fmt.Errorf("%w: messageLength %d outside [16, %d]", errMalformed, h.length, maxMessageSize)
	}
	n := int(h.length) - 16
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, nil, err
	}
	return h, buf, nil
}

// request is a decoded client command, from OP_MSG or the legacy OP_QUERY handshake.
type request struct {
	hdr        msgHeader
	legacy     bool // OP_QUERY: reply with OP_REPLY
	moreToCome bool // OP_MSG moreToCome: never reply
	exhaust    bool // OP_MSG exhaustAllowed
	body       bson.D
}

func cstring(b []byte) (string, []byte, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, fmt.Errorf("%w: unterminated cstring", errMalformed)
	}
	return string(b[:i]), b[i+1:], nil
}

func bsonDoc(b []byte) (bson.Raw, []byte, error) {
	if len(b) < 5 {
		return nil, nil, fmt.Errorf("%w: truncated BSON document", errMalformed)
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > len(b) {
		return nil, nil, fmt.Errorf("%w: BSON document length %d exceeds message", errMalformed, n)
	}
	raw := bson.Raw(b[:n])
	if err := raw.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: invalid BSON: %v", errMalformed, err)
	}
	return raw, b[n:], nil
}

func decodeDoc(raw bson.Raw) (bson.D, error) {
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return d, nil
}

// parseRequest decodes an OP_MSG or OP_QUERY body. Kind-1 document sequences are merged
// into the command body as arrays named by their identifier.
func parseRequest(h msgHeader, b []byte) (*request, error) {
	req := &request{hdr: h}
	switch h.opCode {
	case opMsg:
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: OP_MSG without flagBits", errMalformed)
		}
		flags := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if flags&msgChecksumPresent != 0 {
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: OP_MSG checksum flag without checksum", errMalformed)
			}
			b = b[:len(b)-4]
		}
		req.moreToCome = flags&msgMoreToCome != 0
		req.exhaust = flags&msgExhaustAllowed != 0
		var seqs []bson.E
		for len(b) > 0 {
			kind := b[0]
			b = b[1:]
			switch kind {
			case 0:
				if req.body != nil {
					return nil, fmt.Errorf("%w: OP_MSG with two kind-0 sections", errMalformed)
				}
				raw, rest, err := bsonDoc(b)
				if err != nil {
					return nil, err
				}
				b = rest
				if req.body, err = decodeDoc(raw); err != nil {
					return nil, err
				}
			case 1:
				if len(b) < 4 {
					return nil, fmt.Errorf("%w: truncated kind-1 section", errMalformed)
				}
				size := int(int32(binary.LittleEndian.Uint32(b)))
				if size < 5 || size > len(b) {
					return nil, fmt.Errorf("%w: kind-1 section size %d", errMalformed, size)
				}
				sec := b[4:size]
				b = b[size:]
				ident, rest, err := cstring(sec)
				if err != nil {
					return nil, err
				}
				arr := bson.A{}
				for len(rest) > 0 {
					raw, r2, err := bsonDoc(rest)
					if err != nil {
						return nil, err
					}
					rest = r2
					d, err := decodeDoc(raw)
					if err != nil {
						return nil, err
					}
					arr = append(arr, d)
				}
				seqs = append(seqs, bson.E{Key: ident, Value: arr})
			default:
				return nil, fmt.Errorf("%w: unknown OP_MSG section kind %d", errMalformed, kind)
			}
		}
		if req.body == nil {
			return nil, fmt.Errorf("%w: OP_MSG without a kind-0 section", errMalformed)
		}
		req.body = append(req.body, seqs...)
		return req, nil
	case opQuery:
		req.legacy = true
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: OP_QUERY without flags", errMalformed)
		}
		b = b[4:]
		ns, rest, err := cstring(b)
		if err != nil {
			return nil, err
		}
		if len(rest) < 8 {
			return nil, fmt.Errorf("%w: OP_QUERY without skip/return", errMalformed)
		}
		raw, _, err := bsonDoc(rest[8:])
		if err != nil {
			return nil, err
		}
		if req.body, err = decodeDoc(raw); err != nil {
			return nil, err
		}
		// Unwrap {$query: {...}} and turn "db.$cmd" into the $db field an OP_MSG would carry.
		if len(req.body) > 0 && req.body[0].Key == "$query" {
			if inner, ok := req.body[0].Value.(bson.D); ok {
				req.body = inner
			}
		}
		db := ns
		if i := bytes.IndexByte([]byte(ns), '.'); i >= 0 {
			db = ns[:i]
		}
		req.body = append(req.body, bson.E{Key: "$db", Value: db})
		return req, nil
	default:
		return nil, fmt.Errorf("%w: unsupported opcode %d", errMalformed, h.opCode)
	}
}

// appendMsgReply frames doc as an OP_MSG reply (one kind-0 section, no checksum). flags is 0,
// or msgMoreToCome for a streamed reply after which more replies follow unrequested.
func appendMsgReply(dst []byte, requestID, responseTo int32, flags uint32, doc []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0) // length, patched below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	dst = binary.LittleEndian.AppendUint32(dst, opMsg)
	dst = binary.LittleEndian.AppendUint32(dst, flags)
	dst = append(dst, 0) // section kind 0
	dst = append(dst, doc...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// appendOpReply frames doc as a legacy OP_REPLY with one document (flags AwaitCapable).
func appendOpReply(dst []byte, requestID, responseTo int32, doc []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	dst = binary.LittleEndian.AppendUint32(dst, opReply)
	dst = binary.LittleEndian.AppendUint32(dst, 8) // responseFlags: AwaitCapable
	dst = binary.LittleEndian.AppendUint64(dst, 0) // cursorID
	dst = binary.LittleEndian.AppendUint32(dst, 0) // startingFrom
	dst = binary.LittleEndian.AppendUint32(dst, 1) // numberReturned
	dst = append(dst, doc...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}
