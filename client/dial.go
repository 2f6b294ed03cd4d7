package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"levee/internal/wire"
	leveev1 "levee/proto/leveev1"
)

// Dial connects to the gate at url (ws://host:port/ws) as the player that
// token names, and returns once the gate has sent its Welcome.
//
// If the gate refuses the player it returns the gate's *Error (e.g.
// UNAUTHORIZED), wrapped together with the *CloseError that followed when
// there was one; a connection closed before the Welcome gives an error
// wrapping ErrClosed and the *CloseError (e.g. 1013 when overloaded); an
// HTTP refusal of the handshake (401, 429, 503) is mapped to an *Error too.
// ctx bounds the whole of it. Invalid opts give an error wrapping
// ErrInvalidOptions. Dial tries once; DialRetry and Reconnect try again.
func Dial(ctx context.Context, rawURL, token string, opts Options) (*Client, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("client: dial: %w: %w", errBadURL, err)
	}
	q := u.Query()
	q.Set("token", token)
	u.RawQuery = q.Encode()

	proto := wire.ProtoSubprotocol
	if opts.JSON {
		proto = wire.JSONSubprotocol
	}
	d := *opts.Dialer
	d.Subprotocols = []string{proto}
	header := opts.Header.Clone()

	conn, resp, err := d.DialContext(ctx, u.String(), header)
	if err != nil {
		// Never echo the URL with its token.
		return nil, fmt.Errorf("client: dial %s: %w", rawURL, handshakeError(err, resp))
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	got := conn.Subprotocol()
	if got == "" {
		got = wire.ProtoSubprotocol
	}
	if got != proto {
		conn.Close()
		return nil, fmt.Errorf("client: dial %s: %w: asked %q, got %q", rawURL, ErrSubprotocol, proto, got)
	}

	c := newClient(conn, opts)
	go c.readLoop()

	select {
	case f := <-c.first:
		return c.firstFrame(ctx, rawURL, f)
	case <-c.done:
		// The refusal frame and the close can arrive together: a buffered
		// first frame says more than the close does.
		select {
		case f := <-c.first:
			return c.firstFrame(ctx, rawURL, f)
		default:
		}
		return nil, fmt.Errorf("client: dial %s: no welcome: %w", rawURL, c.Err())
	case <-ctx.Done():
		c.abort()
		return nil, fmt.Errorf("client: dial %s: waiting for welcome: %w", rawURL, ctx.Err())
	}
}

// firstFrame finishes Dial with the gate's first push: a welcome, or a
// typed refusal followed by a close.
func (c *Client) firstFrame(ctx context.Context, rawURL string, f *leveev1.ServerFrame) (*Client, error) {
	if w := f.GetWelcome(); w != nil {
		c.welcome = w
		c.log.Debug("connected", "player", w.GetPlayer().GetId(), "shard", w.GetShard(), "json", c.opts.JSON)
		return c, nil
	}
	refused := fromProto(f.GetError())
	// The gate closes right after refusing; wait briefly for its code.
	t := time.NewTimer(c.opts.CloseTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
	c.abort()
	if ce := closeErrorOf(c.Err()); ce != nil {
		return nil, fmt.Errorf("client: dial %s: refused: %w (%w)", rawURL, refused, ce)
	}
	return nil, fmt.Errorf("client: dial %s: refused: %w", rawURL, refused)
}

// Dial errors that DialRetry does not retry: the url does not parse, or
// the server refused the handshake with a 4xx status that has no meaning
// in the protocol (e.g. 404: wrong path).
var (
	errBadURL      = errors.New("bad url")
	errHTTPRefused = errors.New("handshake refused")
)

func closeErrorOf(err error) *CloseError {
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// handshakeError turns an HTTP refusal of the upgrade into a typed *Error
// where the status has a meaning in the protocol.
func handshakeError(err error, resp *http.Response) error {
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
		return err
	}
	var msg string
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		msg = strings.TrimSpace(string(b))
	}
	if msg == "" {
		msg = resp.Status
	}
	var retry time.Duration
	if s, e := strconv.Atoi(resp.Header.Get("Retry-After")); e == nil && s > 0 {
		retry = time.Duration(s) * time.Second
	}
	var code leveev1.ErrorCode
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		code = leveev1.ErrorCode_ERROR_CODE_UNAUTHORIZED
	case http.StatusForbidden:
		code = leveev1.ErrorCode_ERROR_CODE_FORBIDDEN
	case http.StatusTooManyRequests:
		code = leveev1.ErrorCode_ERROR_CODE_RATE_LIMITED
	case http.StatusServiceUnavailable:
		code = leveev1.ErrorCode_ERROR_CODE_SERVER_FULL
	default:
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return fmt.Errorf("%w: %w: HTTP %d: %s", err, errHTTPRefused, resp.StatusCode, msg)
		}
		return fmt.Errorf("%w: HTTP %d: %s", err, resp.StatusCode, msg)
	}
	return &Error{Code: code, Message: msg, RetryAfter: retry}
}
