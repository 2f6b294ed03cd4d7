package wire

import (
	"bytes"
	"errors"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// A StatusTemplate encodes QueueStatus pushes that differ only in their
// position and eta_ms: the rest of the status (release_rate, line_length,
// grace_ms, mode, ...), which is the same for every player of one walk of
// the admission line, is encoded once, and Append adds the two per-player
// numbers around it. What Append produces decodes (DecodeServer) to the
// very ServerFrame EncodeServer would have written for
// {queue: shared with position and eta_ms set}; only the bytes differ
// (field order in protobuf, member order and spacing in JSON), which both
// encodings allow.
//
// The zero StatusTemplate is not usable; make one with
// Codec.StatusTemplate. Append does not allocate once dst has room.
type StatusTemplate struct {
	json bool
	// shared is, in protobuf, the encoded fields of the shared status; in
	// JSON, the members of its object without the braces ("" when none).
	shared []byte
}

// ErrStatusTemplate: the shared status given to Codec.StatusTemplate sets
// position or eta_ms, which Append fills in.
var ErrStatusTemplate = errors.New("wire: a status template's shared part must leave position and eta_ms zero")

// The field numbers and JSON names the templates use, from the descriptors
// so that they follow the .proto.
var (
	statusFields   = (&leveev2.QueueStatus{}).ProtoReflect().Descriptor().Fields()
	positionField  = statusFields.ByName("position")
	etaField       = statusFields.ByName("eta_ms")
	queueField     = (&leveev2.ServerFrame{}).ProtoReflect().Descriptor().Fields().ByName("queue")
	jsonQueueOpen  = []byte(`{"` + queueField.JSONName() + `":{`)
	jsonPosition   = []byte(`"` + positionField.JSONName() + `":"`)
	jsonETA        = []byte(`"` + etaField.JSONName() + `":"`)
	protoPosTag    = protowire.AppendTag(nil, positionField.Number(), protowire.VarintType)
	protoETATag    = protowire.AppendTag(nil, etaField.Number(), protowire.VarintType)
	protoQueueTag  = protowire.AppendTag(nil, queueField.Number(), protowire.BytesType)
	jsonQueueClose = []byte("}}")
)

// StatusTemplate encodes shared, the part of a QueueStatus that is the
// same for many players, once in c's encoding. shared must leave position
// and eta_ms zero (else ErrStatusTemplate).
func (c Codec) StatusTemplate(shared *leveev2.QueueStatus) (StatusTemplate, error) {
	if shared.GetPosition() != 0 || shared.GetEtaMs() != 0 {
		return StatusTemplate{}, ErrStatusTemplate
	}
	if !c.JSON {
		b, err := proto.Marshal(shared)
		return StatusTemplate{shared: b}, err
	}
	b, err := jsonOut.Marshal(shared)
	if err != nil {
		return StatusTemplate{}, err
	}
	// An object: keep its members (protojson may space them; JSON allows it).
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return StatusTemplate{}, errors.New("wire: protojson gave a QueueStatus that is not an object")
	}
	return StatusTemplate{json: true, shared: bytes.TrimSpace(b[1 : len(b)-1])}, nil
}

// Append appends to dst the ServerFrame pushing the template's status with
// position and etaMs, and returns the extended buffer. Zero values are
// left out, as the encoders leave them out.
func (t *StatusTemplate) Append(dst []byte, position, etaMs uint64) []byte {
	if t.json {
		return t.appendJSON(dst, position, etaMs)
	}
	n := len(t.shared)
	if position != 0 {
		n += len(protoPosTag) + protowire.SizeVarint(position)
	}
	if etaMs != 0 {
		n += len(protoETATag) + protowire.SizeVarint(etaMs)
	}
	dst = append(dst, protoQueueTag...)
	dst = protowire.AppendVarint(dst, uint64(n))
	if position != 0 {
		dst = append(dst, protoPosTag...)
		dst = protowire.AppendVarint(dst, position)
	}
	if etaMs != 0 {
		dst = append(dst, protoETATag...)
		dst = protowire.AppendVarint(dst, etaMs)
	}
	return append(dst, t.shared...)
}

// appendJSON writes {"queue":{"position":"P","etaMs":"E",<shared>}}, with
// the 64-bit numbers as strings, as protojson writes them.
func (t *StatusTemplate) appendJSON(dst []byte, position, etaMs uint64) []byte {
	dst = append(dst, jsonQueueOpen...)
	members := 0
	if position != 0 {
		dst = append(dst, jsonPosition...)
		dst = strconv.AppendUint(dst, position, 10)
		dst = append(dst, '"')
		members++
	}
	if etaMs != 0 {
		if members > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, jsonETA...)
		dst = strconv.AppendUint(dst, etaMs, 10)
		dst = append(dst, '"')
		members++
	}
	if len(t.shared) > 0 {
		if members > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, t.shared...)
	}
	return append(dst, jsonQueueClose...)
}

// init checks what the encoding above takes for granted: position and
// eta_ms are uint64 varints and ServerFrame.queue is a QueueStatus.
func init() {
	for _, f := range []protoreflect.FieldDescriptor{positionField, etaField} {
		if f.Kind() != protoreflect.Uint64Kind || f.Cardinality() == protoreflect.Repeated {
			panic("wire: QueueStatus." + string(f.Name()) + " is no longer a uint64")
		}
	}
	if queueField.Message() == nil || queueField.Message().FullName() != positionField.ContainingMessage().FullName() {
		panic("wire: ServerFrame.queue is no longer a QueueStatus")
	}
}
