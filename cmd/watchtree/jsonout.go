package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The CLI's JSON (-o json) is the console's messages with the proto field names and only the
// fields that are set, like protojson, in two shapes a script can use as they are: every
// integer is a JSON number (protojson writes 64-bit ones as strings), and every enum is its
// value's short name in lower case with dashes, the spelling the string fields use for the
// same things ("running" for SUPERVISOR_STATE_RUNNING, as StreamRow.state has it; "leader" for
// LEASE_ROLE_LEADER). Timestamps are RFC 3339 strings and durations "1.5s", as protojson writes
// them.

// marshalJSON renders m in the CLI's JSON, indented when indent is set.
func marshalJSON(m proto.Message, indent bool) ([]byte, error) {
	b, err := appendMessage(nil, m.ProtoReflect())
	if err != nil || !indent {
		return b, err
	}
	var out bytes.Buffer
	err = json.Indent(&out, b, "", "  ")
	return out.Bytes(), err
}

func appendMessage(b []byte, m protoreflect.Message) ([]byte, error) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration":
		j, err := protojson.Marshal(m.Interface())
		return append(b, j...), err
	}
	b = append(b, '{')
	fields := m.Descriptor().Fields()
	n := 0
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendString(b, string(fd.Name()))
		b = append(b, ':')
		var err error
		switch v := m.Get(fd); {
		case fd.IsList():
			b = append(b, '[')
			for j := range v.List().Len() {
				if j > 0 {
					b = append(b, ',')
				}
				if b, err = appendValue(b, fd, v.List().Get(j)); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		case fd.IsMap():
			b = append(b, '{')
			k := 0
			v.Map().Range(func(key protoreflect.MapKey, val protoreflect.Value) bool {
				if k > 0 {
					b = append(b, ',')
				}
				k++
				b = appendString(b, key.String())
				b = append(b, ':')
				b, err = appendValue(b, fd.MapValue(), val)
				return err == nil
			})
			b = append(b, '}')
		default:
			b, err = appendValue(b, fd, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendMessage(b, v.Message())
	case protoreflect.EnumKind:
		return appendString(b, enumName(fd.Enum(), v.Enum())), nil
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendString(b, strconv.FormatFloat(f, 'g', -1, 64)), nil // "NaN", "+Inf": JSON has no such number
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64), nil
	case protoreflect.StringKind:
		return appendString(b, v.String()), nil
	case protoreflect.BytesKind:
		return appendString(b, base64.StdEncoding.EncodeToString(v.Bytes())), nil
	}
	return nil, fmt.Errorf("json: field %s of kind %v", fd.FullName(), fd.Kind())
}

// enumName is the short name of an enum value: its name without the enum's prefix
// (SUPERVISOR_STATE_ of SupervisorState), lower case, dashes for underscores; the number for
// a value the descriptor does not know.
func enumName(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) string {
	vd := ed.Values().ByNumber(n)
	if vd == nil {
		return strconv.Itoa(int(n))
	}
	name := strings.TrimPrefix(string(vd.Name()), enumPrefix(string(ed.Name())))
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// enumPrefix is UPPER_SNAKE of an enum's CamelCase name, with a trailing underscore.
func enumPrefix(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String()) + "_"
}

func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
