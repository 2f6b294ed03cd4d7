package probe

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Two gates, sampled 2 s apart: the pushes and pings they sent, per
// second, summed; the other results are not counted; a counter that went
// down (a restart) gives no rate that time.
func TestSampleGateRates(t *testing.T) {
	page := func(sent, skipped int64) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "# TYPE gate_line_pushes_total counter\ngate_line_pushes_total{result=\"sent\"} %d\ngate_line_pushes_total{result=\"skipped\"} %d\n", sent, skipped)
			fmt.Fprintf(w, "# TYPE gate_keepalive_pings_total counter\ngate_keepalive_pings_total{result=\"sent\"} %d\n", 2*sent)
		}
	}
	var a, b atomic.Int64
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { page(a.Load(), 1000*a.Load())(w, r) }))
	defer srvA.Close()
	srvB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { page(b.Load(), 0)(w, r) }))
	defer srvB.Close()
	p := New([]Target{{Tier: Gate, URL: srvA.URL}, {Tier: Gate, URL: srvB.URL}}, nil)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a.Store(100)
	b.Store(50)
	if first := p.Sample(context.Background(), t0); first[GatePushes] != 0 || first[GatePings] != 0 {
		t.Errorf("rates from one sample: %v", first)
	}
	a.Store(300) // +200 in 2 s
	b.Store(150) // +100
	second := p.Sample(context.Background(), t0.Add(2*time.Second))
	if got := second[GatePushes]; math.Abs(got-150) > 1e-9 {
		t.Errorf("pushes/s = %v, want 150 ((200 + 100) / 2 s)", got)
	}
	if got := second[GatePings]; math.Abs(got-300) > 1e-9 {
		t.Errorf("pings/s = %v, want 300", got)
	}
	b.Store(10) // gate B restarted
	a.Store(310)
	third := p.Sample(context.Background(), t0.Add(3*time.Second))
	if got := third[GatePushes]; math.Abs(got-10) > 1e-9 {
		t.Errorf("pushes/s after B's restart = %v, want 10 (A's only)", got)
	}
}
