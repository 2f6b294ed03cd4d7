package waitpage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServesPageAndAssets(t *testing.T) {
	h := Handler()
	cases := []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<main id="app" data-state="connecting"`},
		{"/?token=abc&ticket=t1", "text/html; charset=utf-8", "aria-live"},
		{AssetPrefix + "app.js", "text/javascript; charset=utf-8", `"levee.v2.json"`},
		{AssetPrefix + "format.js", "text/javascript; charset=utf-8", "export function"},
		{AssetPrefix + "session.js", "text/javascript; charset=utf-8", "sessionStorage"},
		{AssetPrefix + "view.js", "text/javascript; charset=utf-8", "positionsSeen"},
		{AssetPrefix + "estimate.js", "text/javascript; charset=utf-8", "export function estimate"},
		{AssetPrefix + "style.css", "text/css; charset=utf-8", "progress"},
	}
	for _, c := range cases {
		r := get(t, h, http.MethodGet, c.path, nil)
		b := body(t, r)
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", c.path, r.StatusCode)
			continue
		}
		if got := r.Header.Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if !strings.Contains(b, c.contains) {
			t.Errorf("GET %s: body lacks %q", c.path, c.contains)
		}
		for k, want := range map[string]string{
			"Cache-Control":           "no-cache",
			"Content-Security-Policy": CSP,
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", c.path, k, got, want)
			}
		}
	}
}

// The CSP must allow the page's own scripts and its WebSocket and forbid
// everything else, inline scripts and styles included.
func TestCSPIsStrict(t *testing.T) {
	directives := map[string]string{}
	for _, d := range strings.Split(CSP, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	for name, want := range map[string]string{
		"default-src": "'none'", "script-src": "'self'", "style-src": "'self'",
		"connect-src": "'self'", "frame-ancestors": "'none'", "base-uri": "'none'",
	} {
		if got := directives[name]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if strings.Contains(CSP, "unsafe") || strings.Contains(CSP, "*") {
		t.Errorf("CSP allows too much: %s", CSP)
	}
}

// Every file the page links to is embedded and served, and nothing is
// loaded from elsewhere or written inline (the CSP would block it).
func TestPageIsSelfContained(t *testing.T) {
	h := Handler()
	index := body(t, get(t, h, http.MethodGet, "/", nil))
	links := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(index, -1)
	if len(links) < 2 {
		t.Fatalf("index.html links %d files, want the script and the stylesheet", len(links))
	}
	for _, l := range links {
		if l[1] == "data:," { // the empty favicon
			continue
		}
		if r := get(t, h, http.MethodGet, "/"+l[1], nil); r.StatusCode != http.StatusOK {
			t.Errorf("index.html links %s: status %d", l[1], r.StatusCode)
		}
	}
	if regexp.MustCompile(`<script>|<style|style="|\son[a-z]+=`).MatchString(index) {
		t.Error("index.html has inline script, style or event handlers")
	}
	imports := regexp.MustCompile(`from "\./([^"]+)"`)
	all, err := load()
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range all {
		if regexp.MustCompile(`https?://`).Match(a.body) {
			t.Errorf("%s refers to an external URL", p)
		}
		for _, m := range imports.FindAllStringSubmatch(string(a.body), -1) {
			if _, ok := all[AssetPrefix+m[1]]; !ok {
				t.Errorf("%s imports %s, which is not embedded", p, m[1])
			}
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/index.html", "/ws-not", "/waitpage/", "/waitpage/nope.js", "/static/app.js", "/app.js", "/waitpage/../waitpage.go"} {
		if r := get(t, h, http.MethodGet, p, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, r.StatusCode)
		}
	}
	r := get(t, h, http.MethodPost, "/", nil)
	if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: status %d, Allow %q", r.StatusCode, r.Header.Get("Allow"))
	}
	r = get(t, h, http.MethodHead, "/", nil)
	if r.StatusCode != http.StatusOK || body(t, r) != "" || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD /: status %d, type %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
}

// no-cache means revalidate: a matching ETag gets 304 and no body.
func TestRevalidation(t *testing.T) {
	h := Handler()
	etag := get(t, h, http.MethodGet, AssetPrefix+"app.js", nil).Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	r := get(t, h, http.MethodGet, AssetPrefix+"app.js", map[string]string{"If-None-Match": etag})
	if r.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: status %d, want 304", r.StatusCode)
	}
}
