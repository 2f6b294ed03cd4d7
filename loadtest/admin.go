package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"levee/gate"
)

// ErrAdmin reports a failed call of the gate's admin API.
var ErrAdmin = errors.New("loadtest: admin API")

// LineSetting is a change of the gate's admission line through its admin
// API (POST /admin/line): the fields left zero are not sent.
type LineSetting struct {
	Mode     string        // open, queueing, paced, closed, auto
	Rate     int           // players per Interval
	Interval time.Duration // sent as a Go duration string ("10s")
}

// PerSecond is the setting's pace in players per second, 0 without one.
func (s LineSetting) PerSecond() float64 {
	if s.Rate <= 0 || s.Interval <= 0 {
		return 0
	}
	return float64(s.Rate) / s.Interval.Seconds()
}

func (s LineSetting) String() string {
	var parts []string
	if s.Mode != "" {
		parts = append(parts, "mode "+s.Mode)
	}
	if s.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %d", s.Rate))
	}
	if s.Interval > 0 {
		parts = append(parts, "per "+s.Interval.String())
	}
	return strings.Join(parts, ", ")
}

// Admin calls a gate's line admin API, GET and POST <URL> (e.g.
// http://127.0.0.1:8082/admin/line) with "Authorization: Bearer <Token>".
type Admin struct {
	URL   string
	Token string
	HTTP  *http.Client // nil: a client with a 5 s timeout that only dials loopback
}

func (a *Admin) client() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	nd := &net.Dialer{Timeout: 5 * time.Second, Control: loopbackOnly}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: nd.DialContext}}
}

// Get reads the line's state: GET /admin/line's answer, the gate's own
// type.
func (a *Admin) Get(ctx context.Context) (gate.LineView, error) {
	body, err := a.do(ctx, http.MethodGet, nil)
	if err != nil {
		return gate.LineView{}, err
	}
	var out gate.LineView
	if err := json.Unmarshal(body, &out); err != nil {
		return gate.LineView{}, fmt.Errorf("%w: GET: %v", ErrAdmin, err)
	}
	return out, nil
}

// Set changes the line.
func (a *Admin) Set(ctx context.Context, s LineSetting) error {
	m := map[string]any{}
	if s.Mode != "" {
		m["mode"] = s.Mode
	}
	if s.Rate > 0 {
		m["rate"] = s.Rate
	}
	if s.Interval > 0 {
		m["interval"] = s.Interval.String()
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = a.do(ctx, http.MethodPost, body)
	return err
}

func (a *Admin) do(ctx context.Context, method string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAdmin, err)
	}
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrAdmin, method, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrAdmin, method, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%w: %s: HTTP %d: %s", ErrAdmin, method, resp.StatusCode, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// checkLoopbackURL accepts an http(s) URL whose host is, or resolves only
// to, loopback addresses; flag names it in the error.
func checkLoopbackURL(ctx context.Context, flag, rawURL string, res Resolver) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("%s: want an http URL on a loopback host, got %q", flag, rawURL)
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if !isLoopback(ip) {
			return fmt.Errorf("%w: %s %q: %s is not loopback", ErrNonLocal, flag, rawURL, ip)
		}
		return nil
	}
	addrs, err := res.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: %s %q: host %q does not resolve", ErrNonLocal, flag, rawURL, host)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); !ok || !isLoopback(ip) {
			return fmt.Errorf("%w: %s %q: host %q is %s", ErrNonLocal, flag, rawURL, host, a.IP)
		}
	}
	return nil
}
