package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrPrometheus is returned when Prometheus answers with an error or with
// something other than an instant vector.
var ErrPrometheus = errors.New("adapter: prometheus query failed")

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
	Time   time.Time
}

// Prometheus queries a Prometheus HTTP API's /api/v1/query.
type Prometheus struct {
	base   *url.URL
	client *http.Client
}

// NewPrometheus returns a client for the Prometheus at base
// (http://host:port, optionally with a path prefix).
func NewPrometheus(base string, client *http.Client) (*Prometheus, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("adapter: prometheus url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("adapter: prometheus url %q: want http or https", base)
	}
	return &Prometheus{base: u, client: client}, nil
}

// Query evaluates query at t and returns the instant vector.
func (p *Prometheus) Query(ctx context.Context, query string, t time.Time) ([]Sample, error) {
	form := url.Values{
		"query": {query},
		"time":  {strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64)},
	}
	u := p.base.JoinPath("api", "v1", "query")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPrometheus, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPrometheus, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %w", ErrPrometheus, err)
	}
	return decodeVector(resp.StatusCode, body)
}

// apiResponse is the envelope of every Prometheus HTTP API answer.
type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			// Value is [unix seconds (number), value (string)].
			Value [2]json.RawMessage `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func decodeVector(status int, body []byte) ([]Sample, error) {
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: HTTP %d, undecodable answer: %w", ErrPrometheus, status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%w: HTTP %d, %s: %s", ErrPrometheus, status, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%w: result type %q, want vector", ErrPrometheus, r.Data.ResultType)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, e := range r.Data.Result {
		var ts float64
		if err := json.Unmarshal(e.Value[0], &ts); err != nil {
			return nil, fmt.Errorf("%w: sample time: %w", ErrPrometheus, err)
		}
		var vs string
		if err := json.Unmarshal(e.Value[1], &vs); err != nil {
			return nil, fmt.Errorf("%w: sample value: %w", ErrPrometheus, err)
		}
		// ParseFloat reads Prometheus' "NaN", "+Inf" and "-Inf".
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: sample value: %w", ErrPrometheus, err)
		}
		out = append(out, Sample{
			Labels: e.Metric,
			Value:  v,
			Time:   time.UnixMilli(int64(math.Round(ts * 1e3))),
		})
	}
	return out, nil
}
