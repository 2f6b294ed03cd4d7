// Package codec encodes and decodes the player protocol's v2 frames for the
// SDK and its fake gate (package clienttest), in both subprotocols:
// levee.v2.proto (binary protobuf) and levee.v2.json (protojson, with the
// frame's request, reply and welcome.state written as the game's messages'
// own protojson objects rather than base64 bytes).
//
// It follows the contract of proto/levee/v2/client.proto, which the gate's
// codec (internal/wire) implements for the server side. The JSON form needs
// the game's declaration to know the message types behind the bytes.
package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/leveehq/levee/internal/gamedef"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The WebSocket subprotocols of the v2 frame.
const (
	ProtoSubprotocol = "levee.v2.proto"
	JSONSubprotocol  = "levee.v2.json"
)

// Subprotocols lists them in the server's order of preference.
var Subprotocols = []string{ProtoSubprotocol, JSONSubprotocol}

// MaxFrame is the largest frame a gate reads from a player, in bytes.
const MaxFrame = 4096

// ErrNoGame is returned for a JSON frame whose game messages cannot be
// converted because the codec has no declaration (or the declaration has
// no such action).
var ErrNoGame = errors.New("codec: levee.v2.json needs the game's declaration")

// Codec is one subprotocol's encoding. Def is the game's declaration; the
// JSON form needs it, the binary form does not.
type Codec struct {
	JSON bool
	Def  *gamedef.Def
}

var (
	jsonIn  = protojson.UnmarshalOptions{}
	jsonOut = protojson.MarshalOptions{}
)

// ForSubprotocol returns the codec for a negotiated subprotocol; an empty
// one means binary protobuf.
func ForSubprotocol(p string, def *gamedef.Def) (Codec, bool) {
	switch p {
	case ProtoSubprotocol, "":
		return Codec{Def: def}, true
	case JSONSubprotocol:
		return Codec{JSON: true, Def: def}, true
	}
	return Codec{}, false
}

// RequestType is the request message type of action, nil when unknown.
func (c Codec) RequestType(action string) protoreflect.MessageType {
	if c.Def == nil {
		return nil
	}
	if a, ok := c.Def.Action(action); ok {
		return a.Request
	}
	return nil
}

// ReplyType is the reply message type of action, nil when unknown.
func (c Codec) ReplyType(action string) protoreflect.MessageType {
	if c.Def == nil {
		return nil
	}
	if a, ok := c.Def.Action(action); ok {
		return a.Reply
	}
	return nil
}

func (c Codec) stateType() protoreflect.MessageType {
	if c.Def == nil {
		return nil
	}
	return c.Def.State
}

// EncodeClient serialises a player's frame. On JSON its request bytes are
// written as the action's request message's protojson object.
func (c Codec) EncodeClient(f *leveev2.ClientFrame) ([]byte, error) {
	if !c.JSON {
		return proto.Marshal(f)
	}
	var obj json.RawMessage
	if t := c.RequestType(f.GetAction()); t != nil || len(f.GetRequest()) > 0 {
		var err error
		if obj, err = toJSON(t, f.GetRequest()); err != nil {
			return nil, fmt.Errorf("codec: request of action %q: %w", f.GetAction(), err)
		}
	}
	bare := proto.CloneOf(f)
	bare.Request = nil
	out, err := jsonOut.Marshal(bare)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return out, nil
	}
	return withMember(out, "request", obj)
}

// DecodeClient parses a player's frame (the fake gate's side). On JSON the
// request object is turned into the action's request bytes.
func (c Codec) DecodeClient(data []byte) (*leveev2.ClientFrame, error) {
	f := &leveev2.ClientFrame{}
	if !c.JSON {
		if err := proto.Unmarshal(data, f); err != nil {
			return nil, err
		}
		return f, nil
	}
	rest, req, err := takeMember(data, "request")
	if err != nil {
		return nil, err
	}
	if err := jsonIn.Unmarshal(rest, f); err != nil {
		return f, err
	}
	if req != nil {
		b, err := fromJSON(c.RequestType(f.GetAction()), req)
		if err != nil {
			return f, fmt.Errorf("codec: request of action %q: %w", f.GetAction(), err)
		}
		f.Request = b
	}
	return f, nil
}

// EncodeServer serialises a frame for a player (the fake gate's side).
// action is the action the frame answers, whose reply type the JSON form
// needs; "" for a frame without a reply.
func (c Codec) EncodeServer(f *leveev2.ServerFrame, action string) ([]byte, error) {
	if !c.JSON {
		return proto.Marshal(f)
	}
	bare := proto.CloneOf(f)
	var replyObj, stateObj json.RawMessage
	switch p := f.GetPayload().(type) {
	case *leveev2.ServerFrame_Reply:
		obj, err := toJSON(c.ReplyType(action), p.Reply)
		if err != nil {
			return nil, fmt.Errorf("codec: reply: %w", err)
		}
		replyObj = obj
		bare.Payload = nil
	case *leveev2.ServerFrame_Welcome:
		if p.Welcome.State != nil {
			obj, err := toJSON(c.stateType(), p.Welcome.GetState())
			if err != nil {
				return nil, fmt.Errorf("codec: welcome state: %w", err)
			}
			stateObj = obj
			bare.GetWelcome().State = nil
		}
	}
	out, err := jsonOut.Marshal(bare)
	if err != nil {
		return nil, err
	}
	if replyObj != nil {
		return withMember(out, "reply", replyObj)
	}
	if stateObj != nil {
		return withNested(out, "welcome", "state", stateObj)
	}
	return out, nil
}

// DecodeServer parses a frame from the gate. On JSON, actionOf names the
// action of the request a frame answers, whose reply type converts the
// reply ("" or an action the declaration lacks: the reply's content is
// dropped, its frame kept, so that a late or stray reply is only counted);
// the welcome's state is the declaration's state message.
func (c Codec) DecodeServer(data []byte, actionOf func(requestID uint64) string) (*leveev2.ServerFrame, error) {
	f := &leveev2.ServerFrame{}
	if !c.JSON {
		if err := proto.Unmarshal(data, f); err != nil {
			return nil, err
		}
		return f, nil
	}
	rest, reply, err := takeMember(data, "reply")
	if err != nil {
		return nil, err
	}
	var state json.RawMessage
	if _, ok, err := member(rest, "welcome"); err != nil {
		return nil, err
	} else if ok {
		if rest, state, err = takeNested(rest, "welcome", "state"); err != nil {
			return nil, err
		}
	}
	if err := jsonIn.Unmarshal(rest, f); err != nil {
		return nil, err
	}
	if reply != nil {
		if f.GetPayload() != nil {
			return nil, errors.New("codec: a frame with more than one payload")
		}
		var b []byte
		var t protoreflect.MessageType
		if actionOf != nil {
			t = c.ReplyType(actionOf(f.GetRequestId()))
		}
		if t != nil {
			if b, err = fromJSON(t, reply); err != nil {
				return nil, fmt.Errorf("codec: reply: %w", err)
			}
		}
		f.Payload = &leveev2.ServerFrame_Reply{Reply: b}
	}
	if state != nil && f.GetWelcome() != nil {
		b, err := fromJSON(c.stateType(), state)
		if err != nil {
			return nil, fmt.Errorf("codec: welcome state: %w", err)
		}
		f.GetWelcome().State = b
	}
	return f, nil
}

// toJSON is the protojson object of b, a message of type t.
func toJSON(t protoreflect.MessageType, b []byte) (json.RawMessage, error) {
	if t == nil {
		return nil, ErrNoGame
	}
	m := t.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return jsonOut.Marshal(m)
}

// fromJSON is the protobuf encoding of obj, the protojson of a message of
// type t.
func fromJSON(t protoreflect.MessageType, obj json.RawMessage) ([]byte, error) {
	if t == nil {
		return nil, ErrNoGame
	}
	if bytes.Equal(bytes.TrimSpace(obj), []byte("null")) {
		return nil, nil
	}
	m := t.New().Interface()
	if err := jsonIn.Unmarshal(obj, m); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(m)
	if b == nil && err == nil {
		b = []byte{} // present but empty: the oneof is still set
	}
	return b, err
}

// object reads data as one JSON object's members.
func object(data []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("codec: a frame is a JSON object: %w", err)
	}
	if m == nil {
		return nil, errors.New("codec: a frame is a JSON object")
	}
	return m, nil
}

func member(data []byte, key string) (json.RawMessage, bool, error) {
	m, err := object(data)
	if err != nil {
		return nil, false, err
	}
	v, ok := m[key]
	return v, ok, nil
}

// takeMember removes member key from the object data; v is nil when it had
// none.
func takeMember(data []byte, key string) (rest []byte, v json.RawMessage, err error) {
	m, err := object(data)
	if err != nil {
		return nil, nil, err
	}
	v, ok := m[key]
	if !ok {
		return data, nil, nil
	}
	delete(m, key)
	rest, err = json.Marshal(m)
	return rest, v, err
}

// takeNested removes member inner of the object member outer of data.
func takeNested(data []byte, outer, inner string) (rest []byte, v json.RawMessage, err error) {
	m, err := object(data)
	if err != nil {
		return nil, nil, err
	}
	o, ok := m[outer]
	if !ok || bytes.Equal(bytes.TrimSpace(o), []byte("null")) {
		return data, nil, nil
	}
	o2, v, err := takeMember(o, inner)
	if err != nil {
		return nil, nil, err
	}
	m[outer] = o2
	rest, err = json.Marshal(m)
	return rest, v, err
}

// withMember adds member key: v to the object data.
func withMember(data []byte, key string, v json.RawMessage) ([]byte, error) {
	m, err := object(data)
	if err != nil {
		return nil, err
	}
	m[key] = v
	return json.Marshal(m)
}

// withNested adds member inner: v to the object member outer of data.
func withNested(data []byte, outer, inner string, v json.RawMessage) ([]byte, error) {
	m, err := object(data)
	if err != nil {
		return nil, err
	}
	o, ok := m[outer]
	if !ok {
		o = json.RawMessage("{}")
	}
	o2, err := withMember(o, inner, v)
	if err != nil {
		return nil, err
	}
	m[outer] = o2
	return json.Marshal(m)
}
