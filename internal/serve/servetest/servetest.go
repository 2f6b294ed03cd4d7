// Package servetest checks, from outside as a load balancer or a Prometheus
// scraper would, what a tier's ops endpoints answer while the tier drains.
package servetest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// WantDraining fails t unless the ops server at addr (host:port) answers as a
// draining tier must: /healthz 200 (alive), /readyz 503 "draining" (take me
// out of rotation), and /metrics 200 with metric in it (dashboards and the
// autoscaler keep their figures).
func WantDraining(t testing.TB, addr, metric string) {
	t.Helper()
	base := "http://" + addr
	if code, body := Get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("while draining: GET /healthz = %d %q, want 200", code, body)
	}
	if code, body := Get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Errorf("while draining: GET /readyz = %d %q, want 503 draining", code, body)
	}
	if code, body := Get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, metric) {
		t.Errorf("while draining: GET /metrics = %d (%d bytes), want 200 with %s", code, len(body), metric)
	}
}

// Get fetches url with a short timeout and returns the status code and
// body; a failed request (the server is gone) is code 0 with the error as
// the body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	// No keep-alive: nothing of the check lingers after it (goleak).
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}
