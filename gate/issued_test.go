package gate

import (
	"testing"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// The gate passes the frame's issued_at_ms on to logic, which measures the
// idempotency window from it.
func TestLogicRequestCarriesIssuedAt(t *testing.T) {
	f := &leveev2.ClientFrame{RequestId: 9, IssuedAtMs: 1_900_000_000_000,
		Payload: &leveev2.ClientFrame_BuyItem{BuyItem: &leveev2.BuyItemRequest{ItemId: "potion", Quantity: 1}}}
	req := logicRequest("alice", f)
	if req.GetIssuedAtMs() != 1_900_000_000_000 || req.GetRequestId() != 9 || req.GetPlayerId() != "alice" {
		t.Fatalf("logic request = %v", req)
	}
}
