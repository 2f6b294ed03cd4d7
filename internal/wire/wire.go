// Package wire encodes and decodes the player protocol's frames in its two
// WebSocket subprotocols: binary protobuf and protojson.
package wire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	leveev1 "levee/proto/leveev1"
)

// The WebSocket subprotocols a gate speaks.
const (
	ProtoSubprotocol = "levee.v1.proto"
	JSONSubprotocol  = "levee.v1.json"
)

// Subprotocols lists them in the server's order of preference.
var Subprotocols = []string{ProtoSubprotocol, JSONSubprotocol}

// MaxFrame is the largest frame a gate reads from a player, in bytes.
const MaxFrame = 4096

// Errors from DecodeClient.
var (
	ErrMalformed      = errors.New("wire: malformed frame")
	ErrNoRequestID    = errors.New("wire: request_id is required")
	ErrUnknownPayload = errors.New("wire: unknown or missing payload")
)

// Codec is one subprotocol's encoding.
type Codec struct {
	JSON bool
}

// ForSubprotocol returns the codec for a negotiated subprotocol; an empty
// one means binary protobuf.
func ForSubprotocol(p string) (Codec, bool) {
	switch p {
	case ProtoSubprotocol, "":
		return Codec{}, true
	case JSONSubprotocol:
		return Codec{JSON: true}, true
	}
	return Codec{}, false
}

var (
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: false}
	jsonOut = protojson.MarshalOptions{}
)

func (c Codec) unmarshal(data []byte, m proto.Message) error {
	if c.JSON {
		return jsonIn.Unmarshal(data, m)
	}
	return proto.Unmarshal(data, m)
}

func (c Codec) marshal(m proto.Message) ([]byte, error) {
	if c.JSON {
		return jsonOut.Marshal(m)
	}
	return proto.Marshal(m)
}

// DecodeClient parses a player's frame. When the frame parses but is not
// valid (no request id, no known payload) it returns the frame as far as it
// was read, so the caller can answer its request id with a typed error.
func (c Codec) DecodeClient(data []byte) (*leveev1.ClientFrame, error) {
	if len(data) > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMalformed, len(data), MaxFrame)
	}
	f := &leveev1.ClientFrame{}
	if err := c.unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if f.GetRequestId() == 0 {
		return f, ErrNoRequestID
	}
	if f.GetPayload() == nil {
		return f, ErrUnknownPayload
	}
	// Unknown fields in binary frames mean a payload from a newer protocol.
	if !c.JSON && len(f.ProtoReflect().GetUnknown()) > 0 {
		return f, ErrUnknownPayload
	}
	return f, nil
}

// EncodeServer serialises a frame for a player.
func (c Codec) EncodeServer(f *leveev1.ServerFrame) ([]byte, error) { return c.marshal(f) }

// EncodeClient serialises a player's frame (used by the SDK).
func (c Codec) EncodeClient(f *leveev1.ClientFrame) ([]byte, error) { return c.marshal(f) }

// DecodeServer parses a frame from the gate (used by the SDK).
func (c Codec) DecodeServer(data []byte) (*leveev1.ServerFrame, error) {
	f := &leveev1.ServerFrame{}
	if err := c.unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return f, nil
}
