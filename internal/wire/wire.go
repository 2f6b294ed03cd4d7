// Package wire encodes and decodes the player protocol's frames in its two
// WebSocket subprotocols: binary protobuf (levee.v2.proto) and JSON
// (levee.v2.json).
//
// A frame names one of the game's actions and carries its request. On the
// binary subprotocol the request (ClientFrame.request), the reply
// (ServerFrame.reply) and the player state (Welcome.state) are the game's
// messages protobuf-encoded; on JSON a frame is the frame message's
// protojson except that those three are the game's messages' own protojson
// objects. A Codec converts them with the message types a Resolver gives
// (ForGame for a declaration), so that what the gate hands to logic, and
// what an SDK hands to its caller, is always the protobuf bytes.
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
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leveehq/levee/internal/gamedef"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The WebSocket subprotocols a gate speaks.
const (
	ProtoSubprotocol = "levee.v2.proto"
	JSONSubprotocol  = "levee.v2.json"
)

// Subprotocols lists them in the server's order of preference.
var Subprotocols = []string{ProtoSubprotocol, JSONSubprotocol}

// MaxFrame is the largest frame a gate reads from a player by default, in
// bytes (Codec.MaxFrame overrides it).
const MaxFrame = 4096

// Errors from DecodeClient, always inside a *FrameError.
var (
	ErrMalformed      = errors.New("wire: malformed frame")
	ErrNoRequestID    = errors.New("wire: request_id is required")
	ErrUnknownPayload = errors.New("wire: unknown field")
	// ErrUnknownAction: the frame names no action, or one the game does
	// not declare.
	ErrUnknownAction = errors.New("wire: unknown action")
	// ErrBadRequest: the request does not decode as the action's request
	// message, or is larger than the action allows.
	ErrBadRequest = errors.New("wire: bad request")
)

// A FrameError is a frame DecodeClient refused. Err is one of the errors
// above; RequestID is the frame's request id when it could be read, 0 when
// it could not; Detail says what was wrong in the protocol's own terms
// (field names as the client spelt them), with no internals, so that it can
// be shown to the player.
type FrameError struct {
	Err       error
	RequestID uint64
	Detail    string
}

func (e *FrameError) Error() string { return e.Err.Error() + ": " + e.Detail }
func (e *FrameError) Unwrap() error { return e.Err }

// A Resolver gives the message types of a game's frames.
type Resolver interface {
	// Request is the request type of action and the most bytes its
	// protobuf encoding may have (0: no limit but the frame's); ok is false
	// for an action the game does not declare.
	Request(action string) (typ protoreflect.MessageType, maxBytes int, ok bool)
	// Reply is the reply type of action.
	Reply(action string) (protoreflect.MessageType, bool)
	// State is the player state's type (Welcome.state).
	State() protoreflect.MessageType
}

// ForGame is the Resolver of a declaration.
func ForGame(d *gamedef.Def) Resolver { return defTypes{d} }

type defTypes struct{ d *gamedef.Def }

func (t defTypes) Request(action string) (protoreflect.MessageType, int, bool) {
	a, ok := t.d.Action(action)
	if !ok || a.Request == nil {
		return nil, 0, false
	}
	return a.Request, a.MaxRequestBytes, true
}

func (t defTypes) Reply(action string) (protoreflect.MessageType, bool) {
	a, ok := t.d.Action(action)
	if !ok || a.Reply == nil {
		return nil, false
	}
	return a.Reply, true
}

func (t defTypes) State() protoreflect.MessageType { return t.d.State }

// Codec is one subprotocol's encoding for one game.
type Codec struct {
	JSON bool
	// Game resolves the actions' messages; without it every action is
	// unknown and a JSON reply or state cannot be converted.
	Game Resolver
	// MaxFrame is the largest client frame DecodeClient takes (0:
	// MaxFrame).
	MaxFrame int
}

// ForSubprotocol returns the codec for a negotiated subprotocol; an empty
// one means binary protobuf (the gate refuses a handshake that negotiates
// none, so only a client of an older gate sees it). Set its Game before
// using it for frames with actions.
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

func (c Codec) maxFrame() int {
	if c.MaxFrame > 0 {
		return c.MaxFrame
	}
	return MaxFrame
}

// DecodeClient parses a player's frame and its request: it returns the
// frame, whose Request is the request's protobuf encoding on both
// subprotocols, and the request decoded as the action's request message.
// A frame it refuses comes with a *FrameError that carries the frame's
// request id whenever it can be read:
//
//   - JSON: the frame is a syntactically valid JSON object whose top level
//     holds "requestId" or "request_id" (once, or several times with the
//     same value) as a number or a string protojson reads as a uint64;
//   - binary: the last varint field 1 before the first field that is not
//     well-formed protobuf wire format (as protobuf itself reads it).
//
// When the frame parses but is not valid the frame is also returned as far
// as it was read.
//
// A field the frame does not have (a top-level JSON key that is not a
// ClientFrame field, a binary field number it does not use) is
// ErrUnknownPayload; no action or one the game does not declare is
// ErrUnknownAction; a request that does not decode as the action's request
// message (JSON: is not its protojson object), or is longer than the
// action's limit, is ErrBadRequest; everything else wrong with a frame is
// ErrMalformed.
func (c Codec) DecodeClient(data []byte) (*leveev2.ClientFrame, proto.Message, error) {
	if max := c.maxFrame(); len(data) > max {
		// The gate's read limit closes the connection before this (1009).
		return nil, nil, &FrameError{Err: ErrMalformed, Detail: fmt.Sprintf("%d bytes, limit %d", len(data), max)}
	}
	if c.JSON {
		return c.decodeClientJSON(data)
	}
	f := &leveev2.ClientFrame{}
	if err := proto.Unmarshal(data, f); err != nil {
		fe := &FrameError{Err: ErrMalformed, RequestID: binaryRequestID(data), Detail: cleanDetail(err)}
		return idFrame(fe.RequestID), nil, fe
	}
	id := f.GetRequestId()
	if id == 0 {
		return f, nil, &FrameError{Err: ErrNoRequestID, Detail: "request_id is required"}
	}
	// Unknown fields in binary frames mean a field from a newer protocol.
	if u := f.ProtoReflect().GetUnknown(); len(u) > 0 {
		return f, nil, &FrameError{Err: ErrUnknownPayload, RequestID: id, Detail: unknownBinaryField(u)}
	}
	typ, limit, fe := c.resolve(f)
	if fe != nil {
		return f, nil, fe
	}
	if limit > 0 && len(f.Request) > limit {
		return f, nil, tooLarge(f, limit)
	}
	m := typ.New().Interface()
	if err := proto.Unmarshal(f.Request, m); err != nil {
		return f, nil, &FrameError{Err: ErrBadRequest, RequestID: id, Detail: "request: " + cleanDetail(err)}
	}
	return f, m, nil
}

// resolve finds the request type of a frame's action.
func (c Codec) resolve(f *leveev2.ClientFrame) (protoreflect.MessageType, int, *FrameError) {
	if f.GetAction() == "" {
		return nil, 0, &FrameError{Err: ErrUnknownAction, RequestID: f.GetRequestId(), Detail: "no action"}
	}
	var (
		typ   protoreflect.MessageType
		limit int
		ok    bool
	)
	if c.Game != nil {
		typ, limit, ok = c.Game.Request(f.GetAction())
	}
	if !ok {
		return nil, 0, &FrameError{Err: ErrUnknownAction, RequestID: f.GetRequestId(), Detail: fmt.Sprintf("unknown action %q", clip(f.GetAction()))}
	}
	return typ, limit, nil
}

func tooLarge(f *leveev2.ClientFrame, limit int) *FrameError {
	return &FrameError{Err: ErrBadRequest, RequestID: f.GetRequestId(),
		Detail: fmt.Sprintf("request: %d bytes, action %q takes at most %d", len(f.Request), f.GetAction(), limit)}
}

// decodeClientJSON: the frame's members but request go through protojson
// as a ClientFrame; request, the action's request message as a protojson
// object, through protojson as that message.
func (c Codec) decodeClientJSON(data []byte) (*leveev2.ClientFrame, proto.Message, error) {
	members, ok := validObject(data)
	if !ok {
		fe := jsonRefusal(data)
		return idFrame(fe.RequestID), nil, fe
	}
	var req *jsonMember
	seen := make(map[protoreflect.FieldNumber]bool, len(members))
	for i := range members {
		m := &members[i]
		fd, known := clientFields[m.key]
		if !known {
			fe := &FrameError{Err: ErrUnknownPayload, RequestID: jsonRequestID(members), Detail: fmt.Sprintf("unknown field %q", clip(m.key))}
			return idFrame(fe.RequestID), nil, fe
		}
		if seen[fd.Number()] {
			fe := &FrameError{Err: ErrMalformed, RequestID: jsonRequestID(members), Detail: fmt.Sprintf("field %q given twice", clip(m.key))}
			return idFrame(fe.RequestID), nil, fe
		}
		seen[fd.Number()] = true
		if fd.Number() == requestField {
			req = m
		}
	}
	f := &leveev2.ClientFrame{}
	rest := data
	if req != nil {
		rest = without(data, members, req)
	}
	if err := jsonIn.Unmarshal(rest, f); err != nil {
		fe := &FrameError{Err: ErrMalformed, RequestID: jsonRequestID(members), Detail: cleanDetail(err)}
		return idFrame(fe.RequestID), nil, fe
	}
	id := f.GetRequestId()
	if id == 0 {
		return f, nil, &FrameError{Err: ErrNoRequestID, Detail: "request_id is required"}
	}
	typ, limit, fe := c.resolve(f)
	if fe != nil {
		return f, nil, fe
	}
	m := typ.New().Interface()
	if req != nil && string(req.raw) != "null" {
		if req.raw[0] != '{' {
			return f, nil, &FrameError{Err: ErrBadRequest, RequestID: id, Detail: "request: must be the action's request message as a JSON object"}
		}
		if err := jsonIn.Unmarshal(req.raw, m); err != nil {
			return f, nil, &FrameError{Err: ErrBadRequest, RequestID: id, Detail: "request: " + cleanDetail(err)}
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return f, nil, &FrameError{Err: ErrBadRequest, RequestID: id, Detail: "request: " + cleanDetail(err)}
	}
	f.Request = b
	if limit > 0 && len(b) > limit {
		return f, nil, tooLarge(f, limit)
	}
	return f, m, nil
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

// EncodeServer serialises a frame for a player. action is the action the
// frame answers (its reply's type, for JSON); "" for a frame without a
// reply (a push, an error, a welcome).
func (c Codec) EncodeServer(f *leveev2.ServerFrame, action string) ([]byte, error) {
	if !c.JSON {
		return proto.Marshal(f)
	}
	switch p := f.GetPayload().(type) {
	case *leveev2.ServerFrame_Reply:
		obj, err := c.messageJSON(p.Reply, func() (protoreflect.MessageType, bool) {
			if c.Game == nil {
				return nil, false
			}
			return c.Game.Reply(action)
		}, "reply of action "+action)
		if err != nil {
			return nil, err
		}
		return spliceFrame(serverHead(f), replyKey, obj)
	case *leveev2.ServerFrame_Welcome:
		w := p.Welcome
		wj, err := jsonOut.Marshal(&leveev2.Welcome{Shard: w.GetShard(), Version: w.GetVersion(), PlayerId: w.GetPlayerId()})
		if err != nil {
			return nil, err
		}
		if w.GetState() != nil {
			obj, err := c.messageJSON(w.GetState(), func() (protoreflect.MessageType, bool) {
				if c.Game == nil || c.Game.State() == nil {
					return nil, false
				}
				return c.Game.State(), true
			}, "player state")
			if err != nil {
				return nil, err
			}
			if wj, err = spliceFrame(wj, stateKey, obj); err != nil {
				return nil, err
			}
		}
		return spliceFrame(serverHead(f), welcomeKey, wj)
	}
	return jsonOut.Marshal(f)
}

// serverHead is f's protojson without its payload.
func serverHead(f *leveev2.ServerFrame) []byte {
	b, _ := jsonOut.Marshal(&leveev2.ServerFrame{RequestId: f.GetRequestId(), Backpressure: f.GetBackpressure(),
		Replayed: f.GetReplayed(), Version: f.GetVersion()})
	return b
}

// messageJSON is the protojson object of b decoded as the type typ gives.
func (c Codec) messageJSON(b []byte, typ func() (protoreflect.MessageType, bool), what string) ([]byte, error) {
	t, ok := typ()
	if !ok {
		return nil, fmt.Errorf("wire: no message type for the %s", what)
	}
	m := t.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("wire: the %s does not decode as %s: %w", what, t.Descriptor().FullName(), err)
	}
	return jsonOut.Marshal(m)
}

// EncodeClient serialises a player's frame (for an SDK); on JSON its
// request, the action's request message protobuf-encoded, becomes that
// message's protojson object.
func (c Codec) EncodeClient(f *leveev2.ClientFrame) ([]byte, error) {
	if !c.JSON {
		return proto.Marshal(f)
	}
	head, err := jsonOut.Marshal(&leveev2.ClientFrame{RequestId: f.GetRequestId(), Criticality: f.GetCriticality(),
		TimeoutMs: f.GetTimeoutMs(), IssuedAtMs: f.GetIssuedAtMs(), Action: f.GetAction()})
	if err != nil {
		return nil, err
	}
	obj, err := c.messageJSON(f.GetRequest(), func() (protoreflect.MessageType, bool) {
		if c.Game == nil {
			return nil, false
		}
		t, _, ok := c.Game.Request(f.GetAction())
		return t, ok
	}, "request of action "+f.GetAction())
	if err != nil {
		return nil, err
	}
	return spliceFrame(head, requestKey, obj)
}

// DecodeServer parses a frame from the gate (for an SDK). On JSON, a
// reply is converted to its protobuf encoding with the reply type of the
// action actionOf names for the frame's request id, and a welcome's state
// with the game's state type.
func (c Codec) DecodeServer(data []byte, actionOf func(requestID uint64) string) (*leveev2.ServerFrame, error) {
	f := &leveev2.ServerFrame{}
	if !c.JSON {
		if err := proto.Unmarshal(data, f); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		return f, nil
	}
	members, ok := validObject(data)
	if !ok {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	var reply, welcome *jsonMember
	for i := range members {
		switch members[i].key {
		case replyKey:
			reply = &members[i]
		case welcomeKey:
			welcome = &members[i]
		}
	}
	rest := data
	if reply != nil {
		rest = without(data, members, reply)
	} else if welcome != nil {
		rest = without(data, members, welcome)
	}
	if err := jsonIn.Unmarshal(rest, f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case reply != nil:
		var t protoreflect.MessageType
		ok := false
		if c.Game != nil && actionOf != nil {
			t, ok = c.Game.Reply(actionOf(f.GetRequestId()))
		}
		if !ok {
			return nil, fmt.Errorf("%w: a reply to request %d, which names no known action", ErrMalformed, f.GetRequestId())
		}
		b, err := objectBytes(reply.raw, t)
		if err != nil {
			return nil, fmt.Errorf("%w: reply: %v", ErrMalformed, err)
		}
		f.Payload = &leveev2.ServerFrame_Reply{Reply: b}
	case welcome != nil:
		w, err := c.decodeWelcome(welcome.raw)
		if err != nil {
			return nil, err
		}
		f.Payload = &leveev2.ServerFrame_Welcome{Welcome: w}
	}
	return f, nil
}

func (c Codec) decodeWelcome(raw []byte) (*leveev2.Welcome, error) {
	w := &leveev2.Welcome{}
	members, ok := validObject(raw)
	if !ok {
		return nil, fmt.Errorf("%w: welcome is not a JSON object", ErrMalformed)
	}
	var state *jsonMember
	for i := range members {
		if members[i].key == stateKey {
			state = &members[i]
		}
	}
	rest := raw
	if state != nil {
		rest = without(raw, members, state)
	}
	if err := jsonIn.Unmarshal(rest, w); err != nil {
		return nil, fmt.Errorf("%w: welcome: %v", ErrMalformed, err)
	}
	if state != nil {
		if c.Game == nil || c.Game.State() == nil {
			return nil, fmt.Errorf("%w: welcome: no state type to read the state with", ErrMalformed)
		}
		b, err := objectBytes(state.raw, c.Game.State())
		if err != nil {
			return nil, fmt.Errorf("%w: welcome state: %v", ErrMalformed, err)
		}
		w.State = b
	}
	return w, nil
}

// objectBytes is the protobuf encoding of the protojson object raw as t.
func objectBytes(raw []byte, t protoreflect.MessageType) ([]byte, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	m := t.New().Interface()
	if err := jsonIn.Unmarshal(raw, m); err != nil {
		return nil, err
	}
	return proto.Marshal(m)
}
