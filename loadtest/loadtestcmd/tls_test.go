package loadtestcmd

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leveehq/levee/client/clienttest"
	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/loadtest/report"
	"github.com/leveehq/levee/loadtest/target"
)

// tlsScenario is 40 players over 1 s who each make a few calls.
var tlsScenario = strings.Replace(splitScenario, "players: 300", "players: 40", 1)

// wssGate is a wss:// fake gate and a file with its CA.
func wssGate(t *testing.T, h clienttest.Handler) (*clienttest.Gate, string) {
	t.Helper()
	g := clienttest.NewTLSGameGate([]byte("s3cret"), arena.Game(), nil, h)
	t.Cleanup(g.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, g.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return g, ca
}

// runWSS runs tlsScenario against g with extra flags; it returns the exit
// code, stderr and the run file's summary (nil when none was written).
func runWSS(t *testing.T, g *clienttest.Gate, extra ...string) (int, string, *report.Run) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run.ndjson")
	args := append([]string{"run", "-gate-urls", g.URL(), "-token-secret", "s3cret", "-progress", "off", "-out", out}, extra...)
	args = append(args, writeScenario(t, tlsScenario))
	var stdout, stderr bytes.Buffer
	code := runArena(args, env(nil), &stdout, &stderr)
	f, err := os.Open(out)
	if err != nil {
		return code, stderr.String(), nil
	}
	defer f.Close()
	rep, err := report.Read(f)
	if err != nil {
		t.Fatalf("run file: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return code, stderr.String(), rep
}

// Over wss:// with -ca-file, in two worker processes (the TLS settings go
// to the workers too): every player is admitted and answered, and after
// the first handshakes of each process the bots resume their sessions.
func TestRunWSSWithCAFile(t *testing.T) {
	t.Setenv(workerEnv, "1")
	g, ca := wssGate(t, nil)
	code, stderr, rep := runWSS(t, g, "-ca-file", ca, "-workers", "2")
	if code != exitOK || rep == nil {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if a := rep.Summary.Counters["admitted"]; a != 40 || rep.Summary.Counters["lost"] != 0 {
		t.Fatalf("admitted %d lost %d, want 40 and 0", a, rep.Summary.Counters["lost"])
	}
	full, resumed := g.Handshakes()
	if full+resumed < 40 || resumed < 20 {
		t.Fatalf("handshakes: %d full, %d resumed; want most of 40+ resumed", full, resumed)
	}
	// The bots count theirs (a handshake the gate's handler never saw, if
	// any, is counted too: at least as many).
	if f, r := rep.Summary.Counters["tls_full_handshakes"], rep.Summary.Counters["tls_resumed_handshakes"]; f < full || r < resumed {
		t.Errorf("the run counted %d full and %d resumed handshakes; the gate saw %d and %d", f, r, full, resumed)
	}
	if strings.Contains(stderr, "not verified") {
		t.Errorf("warned without -insecure-skip-verify: %s", stderr)
	}
}

// -tls-session-cache=false: every connection pays a full handshake.
func TestRunWSSWithoutSessionCache(t *testing.T) {
	g, ca := wssGate(t, nil)
	code, stderr, rep := runWSS(t, g, "-ca-file", ca, "-tls-session-cache=false")
	if code != exitOK || rep == nil {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if full, resumed := g.Handshakes(); resumed != 0 || full < 40 {
		t.Fatalf("handshakes: %d full, %d resumed; want 40+ full, none resumed", full, resumed)
	}
	if r := rep.Summary.Counters["tls_resumed_handshakes"]; r != 0 || rep.Summary.Counters["tls_full_handshakes"] < 40 {
		t.Errorf("the run counted %v", rep.Summary.Counters)
	}
}

// Without the CA the bots' dials fail (the gate's certificate is not
// trusted): no player gets in, and the run says so.
func TestRunWSSUntrusted(t *testing.T) {
	g, _ := wssGate(t, nil)
	code, stderr, rep := runWSS(t, g)
	if code != exitThreshold || rep == nil {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitThreshold, stderr)
	}
	if a := rep.Summary.Counters["admitted"]; a != 0 {
		t.Fatalf("admitted %d without trusting the gate's CA", a)
	}
	if full, resumed := g.Handshakes(); full+resumed != 0 {
		t.Fatalf("%d handshakes completed", full+resumed)
	}
}

// -insecure-skip-verify works without the CA, and warns.
func TestRunWSSInsecureSkipVerify(t *testing.T) {
	g, _ := wssGate(t, nil)
	code, stderr, rep := runWSS(t, g, "-insecure-skip-verify")
	if code != exitOK || rep == nil || rep.Summary.Counters["admitted"] != 40 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "certificates are not verified") || !strings.Contains(stderr, target.InsecureWarning) {
		t.Fatalf("no warning on stderr: %q", stderr)
	}
}

// A CA file that is missing or holds no certificate, or -ca-file with
// -insecure-skip-verify, is a usage error (exit 2) and nothing is sent;
// the same in capacity.
func TestTLSFlagsRefused(t *testing.T) {
	var conns atomic.Int64
	g, ca := wssGate(t, func(*clienttest.Conn) { conns.Add(1) })
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeScenario(t, tlsScenario)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-ca-file", filepath.Join(t.TempDir(), "none.pem")}, "-ca-file"},
		{[]string{"-ca-file", junk}, "no PEM certificate"},
		{[]string{"-ca-file", ca, "-insecure-skip-verify"}, "give one"},
	} {
		for _, cmd := range []string{"run", "capacity"} {
			args := append([]string{cmd, "-gate-urls", g.URL()}, c.args...)
			var stdout, stderr bytes.Buffer
			if code := runArena(append(args, file), env(nil), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", args, code, stderr.String(), c.want)
			}
		}
	}
	if full, resumed := g.Handshakes(); full+resumed+conns.Load() != 0 {
		t.Errorf("a bad flag still reached the gate")
	}
}

// The timeline's admin calls go over https to a gate's ops port served
// with the same private CA: -ca-file is trusted there too.
func TestRunWSSAdminOverHTTPS(t *testing.T) {
	g, ca := wssGate(t, nil)
	var calls atomic.Int64
	admin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	admin.StartTLS()
	t.Cleanup(admin.Close)
	// Both fake servers use httptest's one certificate: the CA file fits.
	body := strings.Replace(tlsScenario, "run:\n", "timeline:\n  - at: 0s\n    line: {mode: open}\nrun:\n", 1)
	out := filepath.Join(t.TempDir(), "run.ndjson")
	var stdout, stderr bytes.Buffer
	code := runArena([]string{"run", "-gate-urls", g.URL(), "-token-secret", "s3cret", "-progress", "off", "-out", out,
		"-ca-file", ca, "-admin-urls", admin.URL + "/admin/line", writeScenario(t, body)}, env(nil), &stdout, &stderr)
	if code != exitOK || calls.Load() == 0 {
		t.Fatalf("exit %d, %d admin calls\nstdout:\n%s\nstderr:\n%s", code, calls.Load(), stdout.String(), stderr.String())
	}
}
