// Package wire encodes and decodes the player protocol's frames in its two
// WebSocket subprotocols: binary protobuf and protojson.
//
// A frame the decoder refuses still gives up its request id whenever the id
// can be read (see DecodeClient), so that the gate can answer that id: a
// client waiting for its reply always gets one.
package wire

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The WebSocket subprotocols a gate speaks.
const (
	ProtoSubprotocol = "levee.v2.proto"
	JSONSubprotocol  = "levee.v2.json"
)

// Subprotocols lists them in the server's order of preference.
var Subprotocols = []string{ProtoSubprotocol, JSONSubprotocol}

// MaxFrame is the largest frame a gate reads from a player, in bytes.
const MaxFrame = 4096

// Errors from DecodeClient, always inside a *FrameError.
var (
	ErrMalformed      = errors.New("wire: malformed frame")
	ErrNoRequestID    = errors.New("wire: request_id is required")
	ErrUnknownPayload = errors.New("wire: unknown or missing payload")
)

// A FrameError is a frame DecodeClient refused. Err is ErrMalformed,
// ErrNoRequestID or ErrUnknownPayload; RequestID is the frame's request id
// when it could be read, 0 when it could not; Detail says what was wrong in
// the protocol's own terms (field names as the client spelt them), with no
// internals, so that it can be shown to the player.
type FrameError struct {
	Err       error
	RequestID uint64
	Detail    string
}

func (e *FrameError) Error() string { return e.Err.Error() + ": " + e.Detail }
func (e *FrameError) Unwrap() error { return e.Err }

// Codec is one subprotocol's encoding.
type Codec struct {
	JSON bool
}

// ForSubprotocol returns the codec for a negotiated subprotocol; an empty
// one means binary protobuf (the gate refuses a handshake that negotiates
// none, so only a client of an older gate sees it).
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

// DecodeClient parses a player's frame. A frame it refuses comes with a
// *FrameError that carries the frame's request id whenever it can be read:
//
//   - JSON: the frame is a syntactically valid JSON object whose top level
//     holds "requestId" or "request_id" (once, or several times with the
//     same value) as a number or a string protojson reads as a uint64;
//   - binary: the last varint field 1 before the first field that is not
//     well-formed protobuf wire format (as protobuf itself reads it).
//
// When the frame parses but is not valid (no request id, no known payload)
// the frame is also returned as far as it was read.
//
// An unknown payload (a top-level JSON key that is not a ClientFrame field,
// a binary field no payload uses, or no payload at all) is
// ErrUnknownPayload; everything else wrong with a frame is ErrMalformed.
func (c Codec) DecodeClient(data []byte) (*leveev2.ClientFrame, error) {
	if len(data) > MaxFrame {
		// The gate's read limit closes the connection before this (1009).
		return nil, &FrameError{Err: ErrMalformed, Detail: fmt.Sprintf("%d bytes, limit %d", len(data), MaxFrame)}
	}
	f := &leveev2.ClientFrame{}
	if err := c.unmarshal(data, f); err != nil {
		var fe *FrameError
		if c.JSON {
			fe = jsonRefusal(data, err)
		} else {
			fe = &FrameError{Err: ErrMalformed, RequestID: binaryRequestID(data), Detail: cleanDetail(err)}
		}
		return idFrame(fe.RequestID), fe
	}
	id := f.GetRequestId()
	if id == 0 {
		return f, &FrameError{Err: ErrNoRequestID, Detail: "request_id is required"}
	}
	// Unknown fields in binary frames mean a payload from a newer protocol.
	if !c.JSON && len(f.ProtoReflect().GetUnknown()) > 0 {
		return f, &FrameError{Err: ErrUnknownPayload, RequestID: id, Detail: unknownBinaryField(f.ProtoReflect().GetUnknown())}
	}
	if f.GetPayload() == nil {
		return f, &FrameError{Err: ErrUnknownPayload, RequestID: id, Detail: "no payload"}
	}
	return f, nil
}

// idFrame is what a refused frame was read as: its request id, if any.
func idFrame(id uint64) *leveev2.ClientFrame {
	if id == 0 {
		return nil
	}
	return &leveev2.ClientFrame{RequestId: id}
}

// maxDetail bounds a detail's length, as it may quote the client's frame.
const maxDetail = 200

// cleanDetail is a protobuf decoding error as the player may see it:
// without the library's "proto:" prefix, valid UTF-8, at most maxDetail
// bytes.
func cleanDetail(err error) string {
	s := err.Error()
	for _, p := range []string{"proto: ", "proto:\u00a0"} {
		s = strings.TrimPrefix(s, p)
	}
	return clip(s)
}

func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxDetail {
		return s
	}
	n := maxDetail
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// EncodeServer serialises a frame for a player.
func (c Codec) EncodeServer(f *leveev2.ServerFrame) ([]byte, error) { return c.marshal(f) }

// EncodeClient serialises a player's frame (used by the SDK).
func (c Codec) EncodeClient(f *leveev2.ClientFrame) ([]byte, error) { return c.marshal(f) }

// DecodeServer parses a frame from the gate (used by the SDK).
func (c Codec) DecodeServer(data []byte) (*leveev2.ServerFrame, error) {
	f := &leveev2.ServerFrame{}
	if err := c.unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return f, nil
}
