package wire

import (
	"bytes"
	"encoding/json"
	"errors"
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

const (
	requestIDField = 1
	requestField   = 6 // ClientFrame.request
)

// The JSON names of the members that carry a game's message.
var (
	requestKey = clientFrameField("request").JSONName()
	replyKey   = serverFrameField("reply").JSONName()
	welcomeKey = serverFrameField("welcome").JSONName()
	stateKey   = (&leveev2.Welcome{}).ProtoReflect().Descriptor().Fields().ByName("state").JSONName()
)

func clientFrameField(name protoreflect.Name) protoreflect.FieldDescriptor {
	return (&leveev2.ClientFrame{}).ProtoReflect().Descriptor().Fields().ByName(name)
}

func serverFrameField(name protoreflect.Name) protoreflect.FieldDescriptor {
	return (&leveev2.ServerFrame{}).ProtoReflect().Descriptor().Fields().ByName(name)
}

// jsonMember is one top-level member of a JSON object: its key, unescaped,
// its value as written, and where it stands in the object (from its key's
// opening quote to the end of its value).
type jsonMember struct {
	key        string
	raw        []byte
	start, end int
}

// jsonRefusal explains why data is no frame: it is not JSON or not an
// object.
func jsonRefusal(data []byte) *FrameError {
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return &FrameError{Err: ErrMalformed, Detail: "invalid JSON: " + clip(err.Error())}
	}
	return &FrameError{Err: ErrMalformed, Detail: "a frame is a JSON object"}
}

// validObject lists the top-level members of data; false when data is not
// a valid JSON object.
func validObject(data []byte) ([]jsonMember, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	return scanObject(data)
}

// without is data, an object, with member m of members taken out (and
// the comma that separated it from its neighbour).
func without(data []byte, members []jsonMember, m *jsonMember) []byte {
	i := 0
	for i < len(members) && &members[i] != m {
		i++
	}
	a, b := m.start, m.end
	switch {
	case i+1 < len(members):
		b = members[i+1].start
	case i > 0:
		a = members[i-1].end
	}
	out := make([]byte, 0, len(data)-(b-a))
	out = append(out, data[:a]...)
	return append(out, data[b:]...)
}

// spliceFrame adds the member "key":val to obj, a JSON object as protojson
// writes it.
func spliceFrame(obj []byte, key string, val []byte) ([]byte, error) {
	obj = bytes.TrimRight(obj, " \t\r\n")
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errors.New("wire: protojson wrote something that is not an object")
	}
	body := bytes.TrimSpace(obj[1 : len(obj)-1])
	out := make([]byte, 0, len(obj)+len(key)+len(val)+4)
	out = append(out, obj[:len(obj)-1]...)
	if len(body) > 0 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	out = append(out, val...)
	return append(out, '}'), nil
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
		start := i
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
		members = append(members, jsonMember{key: key, raw: data[i:vend], start: start, end: vend})
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
