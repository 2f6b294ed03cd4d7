package battle

import (
	"context"
	"testing"

	"github.com/leveehq/levee/internal/serve/servetest"
	"github.com/leveehq/levee/internal/testwait"
)

// While battle drains (a job still in flight holds the graceful
// stop), its ops server answers: /readyz 503, /metrics with the in-flight
// gauge and the latency the autoscaler reads. It stops only after gRPC has.
func TestOpsAnswerWhileDraining(t *testing.T) {
	g := newGatedSim()
	r := start(t, testConfig(), func(s *Server) { setRun(s, g.run) })
	errc := make(chan error, 1)
	go func() {
		_, err := simulate(t, context.Background(), r.client, skirmish(1))
		errc <- err
	}()
	<-g.entered
	r.stop()
	ops := r.srv.OpsAddr().String()
	testwait.Until(t, "the drain to begin", func() bool { code, _ := servetest.Get(t, "http://"+ops+"/readyz"); return code != 200 })
	servetest.WantDraining(t, ops, "battle_inflight 1")
	close(g.release)
	if err := <-errc; err != nil {
		t.Fatalf("in-flight job: %v", err)
	}
	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if code, _ := servetest.Get(t, "http://"+ops+"/metrics"); code != 0 {
		t.Fatalf("/metrics answered %d after Run returned", code)
	}
}
