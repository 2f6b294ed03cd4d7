// Package lineadmin is the load tool's client of the gate's line admin API
// (GET and POST /admin/line, wire format levee/internal/lineapi): read the
// admission line's state, change its mode and pace mid-run.
package lineadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/loadtest/target"
)

// ErrAdmin reports a failed call of the gate's admin API.
var ErrAdmin = errors.New("lineadmin: admin API")

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

// Request is the setting as the admin API's POST body.
func (s LineSetting) Request() lineapi.Request {
	r := lineapi.Request{Mode: s.Mode}
	if s.Rate > 0 {
		r.Rate = s.Rate
	}
	if s.Interval > 0 {
		r.Interval = s.Interval.String()
	}
	return r
}

// Admin calls a gate's line admin API, GET and POST <URL> (e.g.
// http://127.0.0.1:8082/admin/line) with "Authorization: Bearer <Token>".
type Admin struct {
	URL   string
	Token string
	HTTP  *http.Client // nil: a client with a 5 s timeout that only dials loopback
}

// loopbackClient is the Admins' default client, one for all, so that
// their connections are reused.
var loopbackClient = target.HTTPClient(5*time.Second, false)

func (a *Admin) client() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	return loopbackClient
}

// Get reads the line's state: GET /admin/line's answer.
func (a *Admin) Get(ctx context.Context) (lineapi.View, error) {
	body, err := a.do(ctx, http.MethodGet, nil)
	if err != nil {
		return lineapi.View{}, err
	}
	var out lineapi.View
	if err := json.Unmarshal(body, &out); err != nil {
		return lineapi.View{}, fmt.Errorf("%w: GET: %v", ErrAdmin, err)
	}
	return out, nil
}

// Set changes the line.
func (a *Admin) Set(ctx context.Context, s LineSetting) error {
	body, err := json.Marshal(s.Request())
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
		return nil, fmt.Errorf("%w: %s: %w", ErrAdmin, method, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrAdmin, method, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%w: %s: HTTP %d: %s", ErrAdmin, method, resp.StatusCode, strings.TrimSpace(string(out)))
	}
	return out, nil
}
