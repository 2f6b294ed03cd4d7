// Package wiretest holds reference readers of a player frame's request id
// for the fuzz targets of the decoder and the gate. They are written apart
// from the decoder (encoding/json and the wire-format spec instead of its
// scanner and protowire), so that a fuzz target can check one against the
// other.
package wiretest

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// RequestID is the request id of a frame in JSON or binary as the reference
// readers read it; 0 when they cannot read one.
func RequestID(data []byte, isJSON bool) uint64 {
	if isJSON {
		return jsonID(data)
	}
	return binaryID(data)
}

// jsonID is a reference reader of a JSON frame's request id, written
// apart from the decoder (with encoding/json): the id of a valid JSON
// object whose requestId / request_id members are all the same plain
// decimal (a number or a string), 0 otherwise.
func jsonID(data []byte) uint64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	var id uint64
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0
		}
		if key != "requestId" && key != "request_id" {
			continue
		}
		v, ok := decimal(raw)
		if !ok || found && v != id {
			return 0
		}
		id, found = v, true
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return 0
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0
	}
	return id
}

func decimal(raw []byte) (uint64, bool) {
	s := string(raw)
	if strings.HasPrefix(s, `"`) && json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	if s == "" || len(s) > 1 && s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// binaryID is a reference reader of a binary frame's request id, written
// from the wire-format spec: the last varint field 1 before the first field
// that is not well-formed. It gives up (0) on groups and on field numbers
// past the spec's maximum, which it does not follow.
func binaryID(b []byte) uint64 {
	var id uint64
	for len(b) > 0 {
		tag, n := varint(b)
		if n == 0 || tag>>3 == 0 {
			return id
		}
		if tag>>3 > uint64(protowire.MaxValidNumber) {
			return 0
		}
		b = b[n:]
		switch tag & 7 {
		case 0:
			v, n := varint(b)
			if n == 0 {
				return id
			}
			if tag>>3 == 1 {
				id = v
			}
			b = b[n:]
		case 1, 5:
			size := 8
			if tag&7 == 5 {
				size = 4
			}
			if len(b) < size {
				return id
			}
			b = b[size:]
		case 2:
			l, n := varint(b)
			if n == 0 || l > uint64(len(b)-n) {
				return id
			}
			b = b[n+int(l):]
		case 3, 4:
			return 0
		default:
			return id
		}
	}
	return id
}

func varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 10 && i < len(b); i++ {
		if i == 9 && b[i] > 1 {
			return 0, 0
		}
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
