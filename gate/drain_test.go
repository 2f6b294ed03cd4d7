package gate

import (
	"context"
	"testing"

	"levee/internal/serve/servetest"
	"levee/internal/wire"
	leveev1 "levee/proto/leveev1"
)

// While the gate drains (a request still in flight at logic), its ops
// server answers: /readyz 503, /metrics with the connection gauge. It stops
// only after the players are gone and gRPC has stopped.
func TestOpsAnswerWhileDraining(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	c, _ := g.connect(t, "alice", wire.ProtoSubprotocol)
	release := make(chan struct{})
	logic.setHandle(func(ctx context.Context, req *leveev1.LogicRequest) (*leveev1.LogicReply, error) {
		<-release
		return defaultReply(req), nil
	})
	<-logic.got // the login
	c.send(profileFrame(1))
	<-logic.got

	g.cancel()
	waitFor(t, "draining", g.isDraining)
	servetest.WantDraining(t, g.OpsAddr().String(), "gate_active_connections 1")
	close(release)
	if f := c.recv(); f.GetRequestId() != 1 || f.GetProfile() == nil {
		t.Fatalf("in-flight request: %v", f)
	}
	c.recvClose()
	g.stop(t)
	if code, _ := servetest.Get(t, "http://"+g.OpsAddr().String()+"/metrics"); code != 0 {
		t.Fatalf("/metrics answered %d after Run returned", code)
	}
}
