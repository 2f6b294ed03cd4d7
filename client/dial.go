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

	"github.com/leveehq/levee/client/internal/codec"
	"github.com/leveehq/levee/internal/apperr"
	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// Dial connects to the gate at url (ws://host:port/ws, or wss:// for a gate
// serving TLS: see Options.TLS) as the player that token names, and returns
// once the gate has sent its Welcome.
//
// While the gate's admission line is active the player first waits in it:
// the gate pushes QueueStatus frames (place, ETA, release rate, a ticket),
// which Dial passes to Options.OnQueue and keeps (Client.Queue), then
// Admitted (Client.Waited, with an admission pass: Client.Ticket), then the
// Welcome. The gate pushes a status
// when the place or the ETA moved by about 10 %, or the mode or the rate
// changed, and otherwise at a heartbeat: every -line-push (2 s) near the
// front, up to 30 times that (60 s) far back, so statuses come seldom
// while a long line stands still (levee/internal/lineapi's
// MaxStatusInterval bounds the gap); a caller showing a live position may
// count down between them at the release rate. The ticket comes in the first status of a connection
// (and again if it changes); the SDK keeps it in every status it hands
// on (OnQueue, Client.Queue, LineError). ctx bounds the whole of it, the
// wait in line included: on launch day give Dial a deadline of many
// minutes (or none, and cancel it when the player gives up), not the
// seconds a request takes. Options.Ticket resumes a place kept from an
// earlier connection.
//
// If the gate refuses the player it returns the gate's *Error (e.g.
// UNAUTHORIZED, or SERVER_FULL while the line is closed for maintenance),
// wrapped together with the *CloseError that followed when there was one; a
// connection closed before the Welcome gives an error wrapping ErrClosed and
// the *CloseError (e.g. 1013 when overloaded); an HTTP refusal of the
// handshake (401, 429, 503) is mapped to an *Error too. When the player had
// been given a place in line, the error also wraps a *LineError with the
// last QueueStatus, whose ticket DialRetry and Reconnect use to resume the
// place. A gate certificate that fails verification gives an error
// wrapping ErrCertificate. Invalid opts give an error wrapping ErrInvalidOptions. Dial tries
// once; DialRetry and Reconnect try again.
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
	if opts.Ticket != "" {
		q.Set("ticket", opts.Ticket)
	}
	u.RawQuery = q.Encode()

	proto := codec.ProtoSubprotocol
	if opts.JSON {
		proto = codec.JSONSubprotocol
	}
	d := *opts.Dialer
	d.Subprotocols = []string{proto}
	d.TLSClientConfig = opts.tlsConfig()
	header := opts.Header.Clone()

	conn, resp, err := d.DialContext(ctx, u.String(), header)
	if err != nil {
		// Never echo the URL with its token.
		return nil, fmt.Errorf("client: dial %s: %w", rawURL, certificateError(handshakeError(err, resp)))
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	got := conn.Subprotocol()
	if got == "" {
		got = codec.ProtoSubprotocol
	}
	if got != proto {
		conn.Close()
		return nil, fmt.Errorf("client: dial %s: %w: asked %q, got %q", rawURL, ErrSubprotocol, proto, got)
	}

	c := newClient(conn, opts)
	go c.readLoop()
	w := &welcomeWait{c: c, rawURL: rawURL}
	cl, err := w.run(ctx)
	if err != nil {
		c.quitDial()
		return nil, w.inLine(err)
	}
	return cl, nil
}

// welcomeWait is Dial's wait for the Welcome, through the admission line.
type welcomeWait struct {
	c          *Client
	rawURL     string
	last       *leveev2.QueueStatus // the last status, nil if none came
	seen       time.Time            // when it came, on Options.Clock
	admittedAt time.Time            // when Admitted came, on Options.Clock
}

func (w *welcomeWait) run(ctx context.Context) (*Client, error) {
	c := w.c
	for {
		select {
		case f := <-c.pre:
			if cl, err, done := w.push(ctx, f); done {
				return cl, err
			}
		case <-c.done:
			// The refusal frame and the close can arrive together: a
			// buffered push says more than the close does.
			for len(c.pre) > 0 { // only this goroutine receives from pre
				if cl, err, done := w.push(ctx, <-c.pre); done {
					return cl, err
				}
			}
			return nil, fmt.Errorf("client: dial %s: no welcome: %w", w.rawURL, c.Err())
		case <-ctx.Done():
			c.quitDial()
			c.abort()
			return nil, fmt.Errorf("client: dial %s: waiting for welcome: %w", w.rawURL, ctx.Err())
		}
	}
}

// push handles one push before the Welcome; done says Dial is over.
func (w *welcomeWait) push(ctx context.Context, f *leveev2.ServerFrame) (cl *Client, err error, done bool) {
	c := w.c
	switch {
	case f.GetQueue() != nil:
		w.last, w.seen = f.GetQueue(), c.clk.Now()
		if c.opts.OnQueue != nil {
			c.opts.OnQueue(f.GetQueue())
		}
		return nil, nil, false
	case f.GetAdmitted() != nil:
		c.admitted = f.GetAdmitted()
		w.admittedAt = c.clk.Now()
		c.log.Debug("admitted", "waited_ms", f.GetAdmitted().GetWaitedMs())
		if c.opts.OnAdmitted != nil {
			c.opts.OnAdmitted(f.GetAdmitted())
		}
		return nil, nil, false
	case f.GetWelcome() != nil:
		c.welcome = f.GetWelcome()
		if pass := c.admitted.GetTicket(); w.last.GetTicket() != "" || pass != "" {
			// The gate's grace for a player let in counts from the release.
			seen := w.admittedAt
			if seen.IsZero() {
				seen = w.seen
			}
			c.line = &LineError{Status: w.last, Seen: seen, Admitted: true, Pass: pass}
		}
		c.log.Debug("connected", "player", c.welcome.GetPlayerId(), "shard", c.welcome.GetShard(), "json", c.opts.JSON)
		return c, nil, true
	}
	cl, err = c.refused(ctx, w.rawURL, f)
	return cl, err, true
}

// inLine wraps a failed Dial's error in a *LineError when the player had
// a place in line.
func (w *welcomeWait) inLine(err error) error {
	if w.last == nil {
		return err
	}
	return &LineError{Status: w.last, Seen: w.seen, Err: err}
}

// refused finishes Dial with the gate's typed refusal, which a close
// follows.
func (c *Client) refused(ctx context.Context, rawURL string, f *leveev2.ServerFrame) (*Client, error) {
	refused := fromProto(f.GetError())
	// The gate closes right after refusing; wait briefly for its code.
	t := time.NewTimer(c.opts.CloseTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
	c.quitDial()
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
	// 401, 403, 429 and 503 have a code in the error table.
	code, ok := apperr.FromHTTP(resp.StatusCode)
	if !ok {
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return fmt.Errorf("%w: %w: HTTP %d: %s", err, errHTTPRefused, resp.StatusCode, msg)
		}
		return fmt.Errorf("%w: HTTP %d: %s", err, resp.StatusCode, msg)
	}
	return &Error{Code: code, Message: msg, RetryAfter: retry}
}
