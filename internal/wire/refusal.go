package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// This file reads what it can of a frame protobuf refused: its request id,
// and for JSON what was wrong with it in terms the client can act on.

// clientFields are ClientFrame's fields by both the names protojson accepts
// (the JSON name and the proto name).
var clientFields = func() map[string]protoreflect.FieldDescriptor {
	fds := (&leveev2.ClientFrame{}).ProtoReflect().Descriptor().Fields()
	m := make(map[string]protoreflect.FieldDescriptor, 2*fds.Len())
	for i := range fds.Len() {
		fd := fds.Get(i)
		m[fd.JSONName()] = fd
		m[string(fd.Name())] = fd
	}
	return m
}()

const requestIDField = 1

// jsonMember is one top-level member of a JSON object: its key, unescaped,
// and its value as written.
type jsonMember struct {
	key string
	raw []byte
}

// jsonRefusal explains why protojson refused data (err) and reads its
// request id if it can.
func jsonRefusal(data []byte, err error) *FrameError {
	if !json.Valid(data) {
		return &FrameError{Err: ErrMalformed, Detail: cleanDetail(err)}
	}
	members, ok := scanObject(data)
	if !ok {
		return &FrameError{Err: ErrMalformed, Detail: "a frame is a JSON object"}
	}
	fe := &FrameError{Err: ErrMalformed, RequestID: jsonRequestID(members)}
	seen := make(map[protoreflect.FieldNumber]bool, len(members))
	var payloads []string
	for _, m := range members {
		fd, known := clientFields[m.key]
		if !known {
			fe.Err, fe.Detail = ErrUnknownPayload, fmt.Sprintf("unknown payload %q", clip(m.key))
			return fe
		}
		if seen[fd.Number()] {
			fe.Detail = fmt.Sprintf("field %q given twice", m.key)
			return fe
		}
		seen[fd.Number()] = true
		if fd.ContainingOneof() != nil && string(m.raw) != "null" {
			payloads = append(payloads, m.key)
		}
	}
	if len(payloads) > 1 {
		fe.Detail = fmt.Sprintf("more than one payload in one frame (%s)", strings.Join(payloads, ", "))
		return fe
	}
	fe.Detail = cleanDetail(err)
	return fe
}

// jsonRequestID is the request id of an object's members: 0 unless every
// requestId / request_id member is a value protojson reads as the same
// uint64.
func jsonRequestID(members []jsonMember) uint64 {
	var id uint64
	found := false
	for _, m := range members {
		fd, ok := clientFields[m.key]
		if !ok || fd.Number() != requestIDField {
			continue
		}
		// protojson itself decides what a uint64 may look like.
		var probe leveev2.ClientFrame
		doc := append(append([]byte(`{"requestId":`), m.raw...), '}')
		if protojson.Unmarshal(doc, &probe) != nil {
			return 0
		}
		if found && probe.RequestId != id {
			return 0
		}
		id, found = probe.RequestId, true
	}
	return id
}

// scanObject lists the top-level members of data, which json.Valid has
// accepted; false when data is not an object. It is a minimal scanner: it
// skips values without decoding them, relying on data being valid JSON,
// but checks its bounds so that it cannot fail on anything else.
func scanObject(data []byte) ([]jsonMember, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	var members []jsonMember
	for i = skipSpace(data, i+1); i < len(data); {
		if data[i] == '}' {
			return members, true
		}
		if data[i] != '"' {
			return nil, false
		}
		end := skipString(data, i)
		key, ok := unquote(data[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		vend := skipValue(data, i)
		if vend <= i {
			return nil, false
		}
		members = append(members, jsonMember{key: key, raw: data[i:vend]})
		i = skipSpace(data, vend)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil, false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at data[i].
func skipString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// skipValue returns the index after the value starting at data[i].
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); {
			switch data[j] {
			case '"':
				j = skipString(data, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(data)
	}
	j := i
	for j < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[j])) {
		j++
	}
	return j
}

// unquote decodes a JSON string literal, escapes included.
func unquote(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	if !strings.ContainsRune(string(lit), '\\') {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return "", false
	}
	return s, true
}

// binaryRequestID reads field 1 of a binary frame protobuf refused: the
// last varint field 1 (protobuf's rule for a repeated scalar) before the
// first field that is not well-formed wire format; 0 if there is none.
func binaryRequestID(data []byte) uint64 {
	var id uint64
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 || num > protowire.MaxValidNumber {
			return id
		}
		data = data[n:]
		if num == requestIDField && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(data)
			if m < 0 {
				return id
			}
			id, data = v, data[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return id
		}
		data = data[m:]
	}
	return id
}

// unknownBinaryField names the first unknown field of a binary frame.
func unknownBinaryField(unknown []byte) string {
	if num, _, n := protowire.ConsumeTag(unknown); n > 0 {
		return fmt.Sprintf("unknown payload (field %d)", num)
	}
	return "unknown payload"
}
