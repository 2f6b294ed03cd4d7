package gate

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/leveehq/levee/internal/apperr"
	"github.com/leveehq/levee/internal/token"
	"github.com/leveehq/levee/internal/wire"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// TestTokenLifetimeIsBounded: a token whose expiry lies further ahead than
// -token-max-lifetime is refused like a bad one (UNAUTHORIZED, 1008); one
// exactly at the bound is welcome.
func TestTokenLifetimeIsBounded(t *testing.T) {
	logic := startFakeLogic(t)
	g := startGate(t, func(c *Config) { c.TokenMaxLifetime = 2 * time.Hour }, logic)
	tooLong, _ := token.Sign([]byte(testSecret), "alice", t0.Add(2*time.Hour+time.Second))
	c := dialRaw(t, g.wsURL(tooLong), wire.ProtoSubprotocol, nil)
	if e := wantError(t, c.recv(), 0, leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED); e.GetMessage() == "" {
		t.Fatal("no message")
	}
	if code := c.recvClose(); code != websocket.ClosePolicyViolation {
		t.Fatalf("close code %d, want 1008", code)
	}
	if n := len(logic.requests()); n != 0 {
		t.Fatalf("logic saw %d requests for a refused token", n)
	}
	atBound, _ := token.Sign([]byte(testSecret), "bob", t0.Add(2*time.Hour))
	if f := dialRaw(t, g.wsURL(atBound), wire.ProtoSubprotocol, nil).recv(); f.GetWelcome().GetPlayerId() != "bob" {
		t.Fatalf("token at the bound: %v, want a welcome", f)
	}
}

func TestTokenMaxLifetimeDefaultAndValidation(t *testing.T) {
	if d := DefaultConfig().TokenMaxLifetime; d != 24*time.Hour {
		t.Fatalf("default -token-max-lifetime %s, want 24h", d)
	}
	cfg := DefaultConfig()
	cfg.LogicAddrs = []string{"127.0.0.1:1"}
	cfg.TokenMaxLifetime = 0
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "-token-max-lifetime") {
		t.Fatalf("Validate = %v, want an error naming -token-max-lifetime", err)
	}
}

// FuzzHandshakeCredentials drives the handshake's credential parsing (the
// Authorization header, the token and ticket query parameters) with any
// values: it never panics, a value it refuses is UNAUTHORIZED (or, for a
// ticket of another player, FORBIDDEN) with a 1008 close, and it accepts
// only what the gate signed: the fuzzer cannot forge a token or a ticket.
func FuzzHandshakeCredentials(f *testing.F) {
	g := startGate(f, nil, startFakeLogic(f))
	good := g.tokenFor(f, "alice")
	ticket := signTicket(g.signingKey(), g.line.id, 7, "alice", t0, t0.Add(time.Minute))
	long, _ := token.Sign(g.signingKey().Secret, "alice", t0.Add(48*time.Hour))
	f.Add("", "token="+url.QueryEscape(good))
	f.Add("Bearer "+good, "")
	f.Add("bearer  "+good+" ", "ticket="+url.QueryEscape(ticket))
	f.Add("", "token="+url.QueryEscape(good)+"&ticket="+url.QueryEscape(ticket))
	f.Add("Basic YWxpY2U6cHc=", "")
	f.Add("Bearer", "token="+good)
	f.Add("", "token=v1.YWxpY2U.9999999999.AAAA")
	f.Add("", "token="+url.QueryEscape(long))
	f.Add("", "token="+url.QueryEscape(good)+"&ticket=t1.0.0.YWxpY2U.0.AAAA")
	f.Add("", "token=%zz&ticket=;;")
	f.Fuzz(func(t *testing.T, authorization, rawQuery string) {
		r := &http.Request{Header: http.Header{}, URL: &url.URL{Path: "/ws", RawQuery: rawQuery}}
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		player, _, err := g.authenticate(r)
		if err != nil {
			if player != "" || apperr.Code(err) != leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED {
				t.Fatalf("refused token: player %q, %v (code %v), want UNAUTHORIZED", player, err, apperr.Code(err))
			}
			return
		}
		if player != "alice" {
			t.Fatalf("accepted player %q, whose token the gate never signed", player)
		}
		claims, err := g.ticketOf(r, player, t0)
		if err != nil {
			_, e, code, _ := lineRefusal(err)
			if code != websocket.ClosePolicyViolation || e.GetCode() != leveev2.ErrorCode_ERROR_CODE_UNAUTHORIZED && e.GetCode() != leveev2.ErrorCode_ERROR_CODE_FORBIDDEN {
				t.Fatalf("refused ticket: %v, close %d, want UNAUTHORIZED or FORBIDDEN and 1008", e, code)
			}
			return
		}
		if claims != nil && (claims.Player != player || claims.ID != 7) {
			t.Fatalf("accepted ticket %+v, which the gate never signed for %q", claims, player)
		}
	})
}
