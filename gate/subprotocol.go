package gate

import (
	"net/http"
	"strings"

	"github.com/leveehq/levee/internal/wire"
)

// subprotocolRefusal is the body of the HTTP 400 that answers a handshake
// offering none of the gate's subprotocols.
var subprotocolRefusal = "levee gate: offer one of these WebSocket subprotocols (Sec-WebSocket-Protocol): " +
	strings.Join(wire.Subprotocols, ", ")

// requireSubprotocol refuses a handshake that offers none of the
// subprotocols the gate speaks, with HTTP 400 and the list of them, before
// any upgrade, and reports whether the handshake may go on. A client that
// omits or misspells the subprotocol would otherwise get binary frames it
// may not expect. Nothing is counted or kept for a refused handshake.
func (s *Server) requireSubprotocol(w http.ResponseWriter, r *http.Request) bool {
	if selectSubprotocol(r) != "" {
		return true
	}
	s.log.Debug("handshake without a known subprotocol",
		"offered", r.Header.Values("Sec-Websocket-Protocol"), "remote", r.RemoteAddr)
	http.Error(w, subprotocolRefusal, http.StatusBadRequest)
	return false
}
