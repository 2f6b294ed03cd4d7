package gate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leveehq/levee/internal/lineapi"
)

// FuzzAdminLineChange drives POST /admin/line with any body, as a form or
// as JSON: the answer is 200 with a line in one of the modes, or a 400 that
// names a field whenever the body could be read as fields, and a refused
// change changes nothing (the line's view is the same before and after).
// It calls the handler directly: no sockets.
func FuzzAdminLineChange(f *testing.F) {
	g := startGate(f, func(c *Config) {
		c.LineMode = "paced"
		c.AdminToken = testAdminToken
	}, startFakeLogic(f))
	h := g.adminHandler()
	call := func(method, contentType, body string) (int, string) {
		r := httptest.NewRequest(method, lineapi.Path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+testAdminToken)
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	for _, s := range []struct {
		json bool
		body string
	}{
		{false, "mode=open"},
		{false, "mode=paced&rate=50&interval=5s"},
		{false, "mode=auto&auto_min_rate=5&auto_max_rate=50"},
		{false, "mode=closed&retry_after=10m"},
		{false, "max_length=1000"},
		{false, "rate=0"},
		{false, "interval=-1s"},
		{false, "mode=sideways"},
		{false, "rate=1&rate=2"},
		{false, "colour=red"},
		{false, ""},
		{false, "%zz"},
		{true, `{"mode":"queueing"}`},
		{true, `{"rate":100,"interval":"10s"}`},
		{true, `{"auto_min_rate":100,"auto_max_rate":10}`},
		{true, `{"rate":true}`},
		{true, `{"mode":`},
		{true, `[]`},
	} {
		f.Add(s.json, s.body)
	}
	f.Fuzz(func(t *testing.T, isJSON bool, body string) {
		ct := "application/x-www-form-urlencoded"
		if isJSON {
			ct = "application/json"
		}
		_, before := call(http.MethodGet, "", "")
		code, msg := call(http.MethodPost, ct, body)
		_, after := call(http.MethodGet, "", "")
		switch code {
		case http.StatusOK:
			var v struct {
				Mode string `json:"mode"`
			}
			if err := json.Unmarshal([]byte(after), &v); err != nil || !slices.Contains([]string{"open", "queueing", "paced", "closed", "auto"}, v.Mode) {
				t.Fatalf("accepted %q: the line is now %s", body, after)
			}
		case http.StatusBadRequest:
			if after != before {
				t.Fatalf("refused %q (%s), yet the line changed:\n%s\nto\n%s", body, msg, before, after)
			}
			if keys, ok := fieldsOf(isJSON, body); ok && !namesAField(msg, keys) {
				t.Fatalf("refused %q with %q, which names no field", body, msg)
			}
		default:
			t.Fatalf("POST %q: %d %s, want 200 or 400", body, code, msg)
		}
	})
}

// fieldsOf reads a body's keys as a form or a JSON object; false when it
// is neither.
func fieldsOf(isJSON bool, body string) ([]string, bool) {
	var keys []string
	if isJSON {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &m) != nil || m == nil {
			return nil, false
		}
		for k := range m {
			keys = append(keys, k)
		}
		return keys, true
	}
	q, err := url.ParseQuery(body)
	if err != nil {
		return nil, false
	}
	for k := range q {
		keys = append(keys, k)
	}
	return keys, true
}

// namesAField reports whether msg names an admin field, or one of keys
// quoted (an empty or odd key must still be recognisable).
func namesAField(msg string, keys []string) bool {
	for _, k := range adminFields {
		if strings.Contains(msg, k) {
			return true
		}
	}
	for _, k := range keys {
		if strings.Contains(msg, strconv.Quote(k)) {
			return true
		}
	}
	return false
}
