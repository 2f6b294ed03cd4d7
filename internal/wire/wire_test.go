package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/leveehq/levee/internal/wire/wiretest"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

func TestRoundTrip(t *testing.T) {
	good := &leveev2.ClientFrame{RequestId: 7, Payload: &leveev2.ClientFrame_BuyItem{BuyItem: &leveev2.BuyItemRequest{ItemId: "sword", Quantity: 1}}}
	for _, c := range []Codec{{}, {JSON: true}} {
		b, err := c.EncodeClient(good)
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.DecodeClient(b)
		if err != nil || !proto.Equal(f, good) {
			t.Fatalf("json=%v: round trip: %v %v", c.JSON, f, err)
		}
	}
}

// jsonCases are refused JSON frames: the cases (an unknown payload
// type, an unknown field, two payloads, numbers out of range, an unknown
// enum name) and the edges of reading the id. They seed the fuzz target.
var jsonCases = []struct {
	in     string
	want   error
	id     uint64
	detail string // a part of the detail
}{
	{`{"requestId":"5","bogus":{}}`, ErrUnknownPayload, 5, `unknown payload "bogus"`},
	{`{"requestId":"5","chat":{"text":"hi"}}`, ErrUnknownPayload, 5, `"chat"`},
	{`{"requestId":"5","buyItem":{"itemId":"x","bogus":1}}`, ErrMalformed, 5, `unknown field "bogus"`},
	{`{"requestId":"5","buyItem":{"itemId":"x"},"getProfile":{}}`, ErrMalformed, 5, `more than one payload in one frame (buyItem, getProfile)`},
	{`{"requestId":"5","buyItem":{"itemId":"x","quantity":4611686018427387904}}`, ErrMalformed, 5, `quantity: 4611686018427387904`},
	{`{"requestId":"5","buyItem":{"itemId":"x","quantity":1.5}}`, ErrMalformed, 5, `quantity: 1.5`},
	{`{"requestId":"5","buyItem":{"itemId":"x","quantity":"lots"}}`, ErrMalformed, 5, `quantity`},
	{`{"requestId":"5","criticality":"CRITICALITY_SUPER","getProfile":{}}`, ErrMalformed, 5, `criticality: "CRITICALITY_SUPER"`},
	{`{"requestId":"5","timeoutMs":-1,"getProfile":{}}`, ErrMalformed, 5, `timeoutMs: -1`},
	{"{\"requestId\":\"5\",\"getProfile\":{\"playerId\":\"\xff\"}}", ErrMalformed, 5, `invalid UTF-8`},
	// The id in every form protojson reads for a uint64, and where it stands.
	{`{"bogus":1,"request_id":7}`, ErrUnknownPayload, 7, `"bogus"`},
	{`{"requestId":18446744073709551615,"bogus":1}`, ErrUnknownPayload, 1<<64 - 1, `"bogus"`},
	{`{"requestId":1e1,"bogus":1}`, ErrUnknownPayload, 10, `"bogus"`},
	{`{"request\u0049d":"8","bogus":1}`, ErrUnknownPayload, 8, `"bogus"`},
	{` { "requestId" : "9" , "getProfile" : { } , "x" : [ "}" ] } `, ErrUnknownPayload, 9, `"x"`},
	{`{"requestId":"5","requestId":"5","getProfile":{}}`, ErrMalformed, 5, `"requestId" given twice`},
	{`{"requestId":"5","request_id":"5","getProfile":{}}`, ErrMalformed, 5, `"request_id" given twice`},
	// Ids that cannot be read: 0.
	{`{"requestId":"5","requestId":"6","getProfile":{}}`, ErrMalformed, 0, `given twice`},
	{`{"requestId":"0001","getProfile":{}}`, ErrMalformed, 0, `requestId`},
	{`{"requestId":"18446744073709551616","getProfile":{}}`, ErrMalformed, 0, `requestId`},
	{`{"requestId":-5,"getProfile":{}}`, ErrMalformed, 0, `requestId`},
	{`{"requestId":"5","getProfile":{`, ErrMalformed, 0, `unexpected EOF`},
	{`{"requestId":"5","getProfile":{}} x`, ErrMalformed, 0, `syntax error`},
	{`["requestId",5]`, ErrMalformed, 0, `JSON object`},
	{`{`, ErrMalformed, 0, ``},
	{`{"getProfile":{}}`, ErrNoRequestID, 0, `request_id is required`},
	{`{"requestId":"0","getProfile":{}}`, ErrNoRequestID, 0, `request_id is required`},
	{`{"requestId":"1"}`, ErrUnknownPayload, 1, `no payload`},
}

func TestDecodeClientJSON(t *testing.T) {
	for _, c := range jsonCases {
		_, err := Codec{JSON: true}.DecodeClient([]byte(c.in))
		checkRefusal(t, c.in, err, c.want, c.id, c.detail)
	}
}

func checkRefusal(t *testing.T, in string, err, want error, id uint64, detail string) {
	t.Helper()
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, want) {
		t.Errorf("%q: err = %v, want a FrameError of %v", in, err, want)
		return
	}
	if fe.RequestID != id {
		t.Errorf("%q: request id %d, want %d", in, fe.RequestID, id)
	}
	if !strings.Contains(fe.Detail, detail) || strings.Contains(fe.Detail, "proto:") || strings.Contains(fe.Detail, "levee.v2") {
		t.Errorf("%q: detail %q, want it to say %q and no internals", in, fe.Detail, detail)
	}
}

// binaryCases are refused binary frames.
var binaryCases = []struct {
	name   string
	in     []byte
	want   error
	id     uint64
	detail string
}{
	{"unknown payload field", cat(frameBytes(3), []byte{0xfa, 0x01, 0x00}), ErrUnknownPayload, 3, "field 31"},
	{"truncated payload", cat(frameBytes(4), []byte{0x5a, 0x05, 0x0a}), ErrMalformed, 4, "invalid wire-format"},
	{"invalid UTF-8 in a string", cat(frameBytes(5), []byte{0x5a, 0x03, 0x0a, 0x01, 0xff}), ErrMalformed, 5, "UTF-8"},
	{"the last id before the damage", cat(frameBytes(6), frameBytes(7), []byte{0x5a}), ErrMalformed, 7, ""},
	{"id after the damage", cat([]byte{0x5a, 0x7f}, frameBytes(8)), ErrMalformed, 0, ""},
	{"garbage", []byte{0xff, 0xff}, ErrMalformed, 0, ""},
	{"no id", mustMarshal(&leveev2.ClientFrame{Payload: &leveev2.ClientFrame_GetProfile{GetProfile: &leveev2.GetProfileRequest{}}}), ErrNoRequestID, 0, "request_id"},
	{"no payload", frameBytes(9), ErrUnknownPayload, 9, "no payload"},
}

func TestDecodeClientBinary(t *testing.T) {
	for _, c := range binaryCases {
		_, err := Codec{}.DecodeClient(c.in)
		checkRefusal(t, c.name, err, c.want, c.id, c.detail)
	}
	if _, err := (Codec{}).DecodeClient(make([]byte, MaxFrame+1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized: %v", err)
	}
}

// TestRefusedFrameKeepsItsID: the frame returned with a refusal carries the
// id, so that a caller that only looks at the frame answers the right id.
func TestRefusedFrameKeepsItsID(t *testing.T) {
	f, err := Codec{JSON: true}.DecodeClient([]byte(`{"requestId":"12","buyItem":{"quantity":1.5}}`))
	if err == nil || f.GetRequestId() != 12 {
		t.Fatalf("frame %v, err %v: want id 12 and an error", f, err)
	}
	if f, err := (Codec{JSON: true}).DecodeClient([]byte(`{`)); err == nil || f != nil {
		t.Fatalf("frame %v, err %v: want no frame and an error", f, err)
	}
}

func frameBytes(id uint64) []byte { return mustMarshal(&leveev2.ClientFrame{RequestId: id}) }

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// FuzzDecodeClientFrame: for any input DecodeClient does not panic; an
// accepted frame has an id and a payload and re-encodes to itself; a
// refused one is a FrameError with a detail fit to show; and whenever the
// reference readers of wiretest can read the frame's request id, the decoder
// reports that same id, accepted or not.
func FuzzDecodeClientFrame(f *testing.F) {
	f.Add(mustMarshal(&leveev2.ClientFrame{RequestId: 1, Payload: &leveev2.ClientFrame_GetProfile{GetProfile: &leveev2.GetProfileRequest{}}}), false)
	f.Add([]byte(`{"requestId":"1","startBattle":{"battleId":"b","units":3,"ticks":10}}`), true)
	f.Add([]byte{0xff, 0xff}, false)
	for _, c := range jsonCases {
		f.Add([]byte(c.in), true)
	}
	for _, c := range binaryCases {
		f.Add(c.in, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		if len(data) > MaxFrame {
			return // the gate's read limit closes the connection first (1009)
		}
		c := Codec{JSON: json}
		want := wiretest.RequestID(data, json)
		fr, err := c.DecodeClient(data)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FrameError", err)
			}
			if want != 0 && fe.RequestID != want {
				t.Fatalf("refused with id %d, the frame's id is %d (%v)", fe.RequestID, want, err)
			}
			if fr.GetRequestId() != fe.RequestID {
				t.Fatalf("frame id %d, error id %d", fr.GetRequestId(), fe.RequestID)
			}
			if fe.Detail == "" || !utf8.ValidString(fe.Detail) || len(fe.Detail) > maxDetail+len("…") {
				t.Fatalf("detail %q", fe.Detail)
			}
			return
		}
		if fr.GetRequestId() == 0 || fr.GetPayload() == nil {
			t.Fatalf("accepted invalid frame %v", fr)
		}
		if want != 0 && fr.GetRequestId() != want {
			t.Fatalf("accepted with id %d, the frame's id is %d", fr.GetRequestId(), want)
		}
		// An accepted frame re-encodes and decodes to the same frame.
		out, err := c.EncodeClient(fr)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.DecodeClient(out)
		if err != nil || !proto.Equal(fr, again) {
			t.Fatalf("re-decode: %v %v", again, err)
		}
	})
}
