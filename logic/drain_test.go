package logic

import (
	"testing"

	"github.com/leveehq/levee/internal/serve/servetest"
	"github.com/leveehq/levee/internal/testwait"
)

// Defect 5 of issue 8: while logic drains (here: a shard still busy with a
// request it accepted, so the gRPC server cannot stop yet), its ops server
// keeps answering, /readyz with 503 and /metrics with the queue depth the
// autoscaler and the dashboards read. It stops only after gRPC has.
func TestOpsAnswerWhileDraining(t *testing.T) {
	e := start(t, envOpts{})
	e.login("alice")
	e.flushAndBlock("alice") // an accepted request the shard holds
	e.cancel()
	testwait.Until(t, "the drain to begin", func() bool {
		code, _ := servetest.Get(t, "http://"+e.srv.OpsAddr().String()+"/readyz")
		return code != 200
	})
	servetest.WantDraining(t, e.srv.OpsAddr().String(), `logic_queue_depth{shard="0"}`)
	e.gate.release()
	if err := e.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if code, _ := servetest.Get(t, "http://"+e.srv.OpsAddr().String()+"/metrics"); code != 0 {
		t.Fatalf("/metrics answered %d after Run returned", code)
	}
}
