package gate

import (
	"bytes"
	"testing"
)

// The gate passes the frame's issued_at_ms on to logic, which measures the
// idempotency window from it.
func TestLogicRequestCarriesIssuedAt(t *testing.T) {
	f := buyFrame(9, "potion", 1)
	f.IssuedAtMs = 1_900_000_000_000
	req := logicRequest("alice", f)
	if req.GetIssuedAtMs() != 1_900_000_000_000 || req.GetRequestId() != 9 || req.GetPlayerId() != "alice" ||
		req.GetCall().GetAction() != f.GetAction() || !bytes.Equal(req.GetCall().GetRequest(), f.GetRequest()) {
		t.Fatalf("logic request = %v", req)
	}
}
