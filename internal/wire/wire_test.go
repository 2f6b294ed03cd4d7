package wire

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	leveev1 "levee/proto/leveev1"
)

func TestDecodeClient(t *testing.T) {
	good := &leveev1.ClientFrame{RequestId: 7, Payload: &leveev1.ClientFrame_BuyItem{BuyItem: &leveev1.BuyItemRequest{ItemId: "sword", Quantity: 1}}}
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
	j := Codec{JSON: true}
	cases := []struct {
		in   string
		want error
	}{
		{`{`, ErrMalformed},
		{`{"requestId":"1","bogus":{}}`, ErrMalformed},
		{`{"requestId":"1"}`, ErrUnknownPayload},
		{`{"getProfile":{}}`, ErrNoRequestID},
		{`{"requestId":"1","buyItem":{"itemId":"x","quantity":"lots"}}`, ErrMalformed},
	}
	for _, c := range cases {
		if _, err := j.DecodeClient([]byte(c.in)); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.in, err, c.want)
		}
	}
	// A binary frame with a field number no payload uses.
	unknown := append(proto.Clone(&leveev1.ClientFrame{RequestId: 3}).(*leveev1.ClientFrame).ProtoReflect().GetUnknown(), 0xfa, 0x01, 0x00) // field 31, length 0
	b, _ := proto.Marshal(&leveev1.ClientFrame{RequestId: 3})
	if f, err := (Codec{}).DecodeClient(append(b, unknown...)); !errors.Is(err, ErrUnknownPayload) || f.GetRequestId() != 3 {
		t.Errorf("unknown binary payload: %v, %v", f, err)
	}
	if _, err := (Codec{}).DecodeClient(make([]byte, MaxFrame+1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized: %v", err)
	}
}

func FuzzDecodeClientFrame(f *testing.F) {
	b, _ := proto.Marshal(&leveev1.ClientFrame{RequestId: 1, Payload: &leveev1.ClientFrame_GetProfile{GetProfile: &leveev1.GetProfileRequest{}}})
	f.Add(b, false)
	f.Add([]byte(`{"requestId":"1","startBattle":{"battleId":"b","units":3,"ticks":10}}`), true)
	f.Add([]byte{0xff, 0xff}, false)
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		c := Codec{JSON: json}
		fr, err := c.DecodeClient(data)
		if err != nil {
			return
		}
		if fr.GetRequestId() == 0 || fr.GetPayload() == nil {
			t.Fatalf("accepted invalid frame %v", fr)
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
