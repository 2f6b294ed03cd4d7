// Package waitpage is the gate's waiting page for browsers: a small page of
// plain HTML, CSS and JavaScript, embedded in the binary (no build step, no
// external resources), that connects to the gate's /ws endpoint over the
// JSON subprotocol and shows the player's place in the admission line, the
// ETA, the release rate and a progress bar, then "You're in!".
//
// The page is opened as /?token=<player token>[&ticket=<line ticket>].
// It connects to /ws on its own host, over wss:// when it was served over
// https (a gate with -tls-cert; e2e's browser test checks it), ws://
// otherwise. It
// keeps its state in data attributes of its <main> element for tests and
// tools: data-state (connecting, waiting, retrying, admitted, error),
// data-position (the place shown) and data-positions-seen (the distinct
// places the gate pushed, in order, comma-separated).
//
// The gate pushes a status when something changes and otherwise at a
// heartbeat (up to 60 s far back in the line); between pushes the page
// counts the last one down at the release rate it shows, never below 1
// and never past the step at which the gate would have pushed
// (static/estimate.js). The ticket comes in a connection's first status
// only; the page keeps the last one it was given. The admission pass in
// the Admitted frame (its ticket field) is ignored: once in, the page
// forgets the ticket, and a reconnect after admission is a new arrival.
package waitpage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var files embed.FS

// CSP lets the page load only its own scripts and styles and open
// WebSocket connections to its own origin ('self' covers ws: and wss: on the
// same host in CSP level 3 browsers); nothing inline, no frames, no forms.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// AssetPrefix is where the page's scripts and styles are served.
const AssetPrefix = "/waitpage/"

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

type asset struct {
	name, ctype, etag string
	body              []byte
}

// Handler serves the page at "/" and its assets under AssetPrefix; any
// other path is 404 and any method but GET and HEAD is 405. Every answer
// has Cache-Control: no-cache (with an ETag, so revalidation is cheap), the
// CSP and nosniff, and no Referer leaves the page (the URL holds a token).
func Handler() http.Handler {
	assets, err := load()
	if err != nil {
		panic("waitpage: embedded files: " + err.Error()) // a build defect
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}

// load reads the embedded files into a map from URL path to asset:
// static/index.html at "/", every other file at AssetPrefix+name.
func load() (map[string]asset, error) {
	m := map[string]asset{}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		name := strings.TrimPrefix(p, "static/")
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			ctype = "application/octet-stream"
		}
		a := asset{name: name, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, body: body}
		if name == "index.html" {
			m["/"] = a
		} else {
			m[AssetPrefix+name] = a
		}
		return nil
	})
	return m, err
}
