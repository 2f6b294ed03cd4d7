package gate

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"levee/internal/wire"
	leveev1 "levee/proto/leveev1"
)

// FuzzDecodeClientFrame checks the gate's side of decoding: any bytes either
// route (a request id and a known payload, mapped to a logic action) or get
// exactly one typed error reply that encodes, never both and never neither.
func FuzzDecodeClientFrame(f *testing.F) {
	b, _ := proto.Marshal(profileFrame(1))
	f.Add(b, false)
	f.Add(append(b, 0xfa, 0x01, 0x00), false)
	f.Add([]byte(`{"requestId":"1","startBattle":{"battleId":"b","units":3,"ticks":10}}`), true)
	f.Add([]byte(`{"requestId":"2"}`), true)
	f.Add([]byte{0xff, 0xff}, false)
	f.Fuzz(func(t *testing.T, data []byte, json bool) {
		codec := wire.Codec{JSON: json}
		fr, reply := decodeFrame(codec, data)
		if (fr == nil) == (reply == nil) {
			t.Fatalf("frame %v and reply %v: want exactly one", fr, reply)
		}
		if reply != nil {
			if reply.GetError().GetCode() == leveev1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				t.Fatalf("untyped error reply %v", reply)
			}
			if _, err := codec.EncodeServer(reply); err != nil {
				t.Fatalf("reply does not encode: %v", err)
			}
			return
		}
		req := logicRequest("p1", fr)
		if req.GetAction() == nil || req.GetPlayerId() != "p1" || req.GetRequestId() != fr.GetRequestId() || actionOf(fr) == actionInvalid {
			t.Fatalf("routable frame %v made logic request %v", fr, req)
		}
	})
}
