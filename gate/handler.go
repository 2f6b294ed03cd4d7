package gate

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"levee/internal/apperr"
	"levee/internal/token"
	"levee/internal/wire"
	leveev1 "levee/proto/leveev1"
)

// handleWS authenticates the player, upgrades, starts the connection's one
// goroutine and returns, so no HTTP handler goroutine or HTTP buffers stay
// with the connection.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if s.isDraining() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "gate shutting down", http.StatusServiceUnavailable)
		return
	}
	playerID, authErr := s.authenticate(r)

	var release func()
	var refusal *leveev1.Error
	if authErr == nil && s.admit != nil {
		rel, retryAfter, err := s.admit(r, playerID)
		if err != nil {
			refusal = apperr.Reply(err, retryAfter)
		} else {
			release = rel
		}
	}

	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil { // Upgrade has answered with an HTTP error
		if release != nil {
			release()
		}
		s.log.Debug("websocket upgrade failed", "err", err, "remote", r.RemoteAddr)
		return
	}
	codec, _ := wire.ForSubprotocol(ws.Subprotocol())
	c := &conn{
		s:        s,
		ws:       ws,
		codec:    codec,
		msgType:  websocket.BinaryMessage,
		playerID: playerID,
		release:  release,
	}
	if codec.JSON {
		c.msgType = websocket.TextMessage
	}
	if authErr == nil {
		_, c.logic = s.logic.route(playerID)
		if s.newAllow != nil {
			c.allow = s.newAllow(playerID)
		}
	}
	c.ctx, c.cancel = context.WithCancel(s.baseCtx)
	if !s.track(c) {
		// The gate began to stop between the check above and now.
		s.m.connections.WithLabelValues(resultShuttingDown).Inc()
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseServiceRestart, "server restarting"),
			time.Now().Add(s.cfg.WriteTimeout))
		_ = ws.Close()
		c.cancel()
		if release != nil {
			release()
		}
		return
	}
	go c.serve(authErr, refusal)
}

// authenticate reads the token from "Authorization: Bearer <tok>" or the
// token query parameter and verifies it at the clock's now.
func (s *Server) authenticate(r *http.Request) (string, error) {
	tok := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", fmt.Errorf("%w: Authorization is not a Bearer token", apperr.ErrUnauthorized)
		}
		tok = strings.TrimSpace(rest)
	} else {
		tok = r.URL.Query().Get("token")
	}
	if tok == "" {
		return "", fmt.Errorf("%w: missing token", apperr.ErrUnauthorized)
	}
	id, err := token.Verify(s.secret, tok, s.clock.Now())
	if err != nil {
		return "", fmt.Errorf("%w: %w", apperr.ErrUnauthorized, err)
	}
	return id, nil
}
