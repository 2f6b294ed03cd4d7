package gate

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leveehq/levee/internal/wire"
)

// TestHandshakeWithoutSubprotocolIsRefused: a client that offers no
// subprotocol, or only ones the gate does not speak, gets HTTP 400 naming
// the supported ones before any upgrade, and nothing is kept; one that
// offers a known one among others gets it. The v1 names (before the frame
// carried an action name) are unknown.
func TestHandshakeWithoutSubprotocolIsRefused(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, nil, logic)
	for _, offered := range [][]string{nil, {"levee.v2.jsn"}, {"LEVEE.V2.JSON"}, {"levee.v1.proto"}, {"levee.v1.json"}, {"chat", "levee.v1.proto"}} {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: offered}
		ws, resp, err := d.Dial(g.wsURL(g.tokenFor(t, "alice")), nil)
		if err == nil {
			_ = ws.Close()
			t.Fatalf("%q: upgraded to %q, want HTTP 400", offered, ws.Subprotocol())
		}
		if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
			t.Fatalf("%q: dial: %v", offered, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%q: HTTP %d, want 400", offered, resp.StatusCode)
		}
		for _, sp := range wire.Subprotocols {
			if !strings.Contains(string(body), sp) {
				t.Fatalf("%q: body %q does not name %s", offered, body, sp)
			}
		}
	}
	if got := testutil.ToFloat64(g.m.handshakes); got != 0 {
		t.Fatalf("handshakes in progress = %v, want 0", got)
	}
	for _, r := range []string{resultAccepted, resultUnauthorized, resultLogicRefused, resultRefused, resultShuttingDown, resultServerFull} {
		if got := testutil.ToFloat64(g.m.connections.WithLabelValues(r)); got != 0 {
			t.Fatalf("gate_connections_total{%s} = %v, want 0", r, got)
		}
	}
	if reqs := logic.requests(); len(reqs) != 0 {
		t.Fatalf("logic saw %v, want nothing (no login)", reqs)
	}

	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{"chat", wire.JSONSubprotocol}}
	ws, _, err := d.Dial(g.wsURL(g.tokenFor(t, "alice")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if ws.Subprotocol() != wire.JSONSubprotocol {
		t.Fatalf("negotiated %q, want %s", ws.Subprotocol(), wire.JSONSubprotocol)
	}
}
