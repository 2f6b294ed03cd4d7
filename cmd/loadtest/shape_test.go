package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"levee/client/clienttest"
)

// The golden shapes pin the legacy scenarios' JSON reports (-json-out):
// every key path, with the JSON types it may have. A report that gains,
// loses or retypes a key fails here; `go test ./cmd/loadtest -run Shape
// -update-shapes` rewrites the files (then review the diff).
var updateShapes = flag.Bool("update-shapes", false, "rewrite testdata/*.shape from this run")

// dynamicMaps are the report maps keyed by data (codes, reasons, phase and
// operation names): their keys collapse to "*".
var dynamicMaps = map[string]bool{
	"business": true, "overload": true, "failed": true, "lost": true, "dial_failures": true, "disconnects": true,
	"rss_max_by_phase_bytes": true, "cpu_cores_by_phase": true, "ops": true,
	"failures": true, "drop_reasons": true, "drop_examples": true, "failure_examples": true,
}

// stringMaps are the dynamic maps whose values are strings (first errors).
var stringMaps = map[string]bool{"drop_examples": true, "failure_examples": true}

// Written by -update-shapes besides what the run showed: paths that are
// there only in some runs (with their type), types a path may also have,
// and subtrees that are there only in some runs with the shape of another
// (the line report's pace after a change is shaped like the one before).
var (
	optionalPaths = map[string]string{"warnings[]": "string", "processes[].last_error": "string",
		"windows_per_s[]": "number"}
	// fileOptional are a shape file's own optional top-level keys.
	fileOptional = map[string]map[string]string{"testdata/line_report.shape": {"change_error": "string"}}
	extraTypes   = map[string]string{"warnings": "array|null", "windows_per_s": "array|null"}
	mirrorPaths  = map[string]string{"after": "before"}
)

// jsonShape adds v's key paths and their JSON types to out.
func jsonShape(v any, path string, out map[string]map[string]bool) {
	add := func(typ string) {
		if out[path] == nil {
			out[path] = map[string]bool{}
		}
		out[path][typ] = true
	}
	switch v := v.(type) {
	case map[string]any:
		add("object")
		last := path[strings.LastIndexByte(path, '.')+1:]
		for k, e := range v {
			if dynamicMaps[last] {
				k = "*"
			}
			jsonShape(e, strings.TrimPrefix(path+"."+k, "$."), out)
		}
	case []any:
		add("array")
		for _, e := range v {
			jsonShape(e, path+"[]", out)
		}
	case string:
		add("string")
	case float64:
		add("number")
	case bool:
		add("bool")
	case nil:
		add("null")
	default:
		add(fmt.Sprintf("%T", v))
	}
}

// omitzero reports whether p is in a latency of the reports that is left
// out when nothing was measured (a phase that served no critical request).
func omitzero(p string) bool {
	for _, seg := range strings.Split(p, ".") {
		if strings.HasPrefix(seg, "latency_") && strings.HasSuffix(seg, "_from_due") {
			return true
		}
	}
	return false
}

// golden is a shape file: "path<TAB>type|type[<TAB>optional]" lines.
type golden map[string]struct {
	types    map[string]bool
	optional bool
}

func readGolden(t *testing.T, file string) golden {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	g := golden{}
	for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "optional") {
			t.Fatalf("%s:%d: bad line %q", file, i+1, l)
		}
		e := g[f[0]]
		e.types = map[string]bool{}
		for _, typ := range strings.Split(f[1], "|") {
			e.types[typ] = true
		}
		e.optional = len(f) == 3
		g[f[0]] = e
	}
	return g
}

// checkShape compares the JSON report in file with the golden shape: no
// path that is not in it, no type it does not allow, every path not marked
// optional present.
func checkShape(t *testing.T, data []byte, goldenFile string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	got := map[string]map[string]bool{}
	jsonShape(v, "$", got)
	if *updateShapes {
		for p := range got {
			last := p[strings.LastIndexByte(p, '.')+1:]
			if dynamicMaps[last] && last != "ops" && got[p]["object"] && got[p+".*"] == nil {
				typ := "number"
				if stringMaps[last] {
					typ = "string"
				}
				got[p+".*"] = map[string]bool{typ: true}
			}
		}
		for p, typs := range extraTypes {
			for _, typ := range strings.Split(typs, "|") {
				if got[p] != nil {
					got[p][typ] = true
				}
			}
		}
		optional := maps.Clone(optionalPaths)
		maps.Copy(optional, fileOptional[goldenFile])
		for p, typ := range optional {
			parent, ok := strings.CutSuffix(p, "[]")
			if !ok {
				parent = "$"
				if i := strings.LastIndexByte(p, '.'); i >= 0 {
					parent = p[:i]
				}
			}
			if got[p] == nil && got[parent] != nil {
				got[p] = map[string]bool{typ: true}
			}
		}
		mirrored := map[string]bool{}
		for to, from := range mirrorPaths {
			if got[to] != nil {
				continue
			}
			for p, typs := range got {
				if rest, ok := strings.CutPrefix(p, from); ok && (rest == "" || rest[0] == '.') {
					mirrored[to+rest] = true
					got[to+rest] = maps.Clone(typs)
				}
			}
		}
		var b strings.Builder
		for _, p := range slices.Sorted(maps.Keys(got)) {
			fmt.Fprintf(&b, "%s\t%s", p, strings.Join(slices.Sorted(maps.Keys(got[p])), "|"))
			if optional[p] != "" || mirrored[p] || strings.HasSuffix(p, ".*") && !strings.HasSuffix(p, "ops.*") || omitzero(p) {
				b.WriteString("\toptional")
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(goldenFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return v
	}
	g := readGolden(t, goldenFile)
	for _, p := range slices.Sorted(maps.Keys(got)) {
		e, ok := g[p]
		if !ok {
			t.Errorf("%s: key %q (%v) is not in the golden shape", goldenFile, p, slices.Sorted(maps.Keys(got[p])))
			continue
		}
		for typ := range got[p] {
			if !e.types[typ] {
				t.Errorf("%s: key %q is %s, the golden shape allows %v", goldenFile, p, typ, slices.Sorted(maps.Keys(e.types)))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(g)) {
		if _, ok := got[p]; !ok && !g[p].optional {
			t.Errorf("%s: key %q is missing", goldenFile, p)
		}
	}
	return v
}

// metricsStub is a /metrics page with the figures the overload sampler reads.
func metricsStub(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "go_goroutines 12\nprocess_resident_memory_bytes 2.5e+07\nprocess_cpu_seconds_total 3.25\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func num(t *testing.T, v any, path string) float64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%s: %v is not a number", path, v)
	}
	return f
}

func obj(t *testing.T, v any, path string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %v is not an object", path, v)
	}
	return m
}

func sumObj(t *testing.T, v any, path string) float64 {
	s := 0.0
	for k, e := range obj(t, v, path) {
		s += num(t, e, path+"."+k)
	}
	return s
}

// overloadShape runs the small overload scenario with extra flags and
// checks its JSON report against the golden shape and its invariants; it
// returns the report and the table.
func overloadShape(t *testing.T, extra ...string) (map[string]any, string) {
	t.Helper()
	g := clienttest.NewGate([]byte("s3cret"), clienttest.Game)
	defer g.Close()
	out := filepath.Join(t.TempDir(), "overload.json")
	args := append(overloadArgs(g.URL()), "-json-out", out, "-max-rss-mb", "512",
		"-metrics-urls", "gate="+metricsStub(t), "-metrics-every", "100ms")
	var stdout, stderr bytes.Buffer
	code := run(append(args, extra...), env(nil), &stdout, &stderr)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr.String())
	}
	rep := checkShape(t, data, "testdata/overload_report.shape")

	// Invariants: the verdict is the criteria's and the exit code's; the
	// criteria are these, in this order; every phase's counts add up.
	passed := rep["passed"].(bool)
	var keys []string
	all := true
	for _, c := range rep["criteria"].([]any) {
		c := obj(t, c, "criteria[]")
		keys = append(keys, c["key"].(string))
		all = all && c["pass"].(bool)
	}
	if want := []string{"completed", "connections", "capacity", "goodput", "p99", "replies", "memory"}; !slices.Equal(keys, want) {
		t.Errorf("criteria keys %v, want %v", keys, want)
	}
	if passed != all || (code == 0) != passed {
		t.Errorf("passed %v, criteria all pass %v, exit %d", passed, all, code)
	}
	phases := []any{rep["capacity_phase"]}
	for _, st := range rep["capacity_steps"].([]any) {
		phases = append(phases, obj(t, st, "capacity_steps[]")["phase"])
	}
	phases = append(phases, rep["baseline_phase"], rep["overload_phase"])
	answered := 0.0
	for i, p := range phases {
		p := obj(t, p, fmt.Sprint("phase ", i))
		name := p["name"].(string)
		sent, ans := num(t, p["sent"], name+".sent"), num(t, p["answered"], name+".answered")
		if lost := sumObj(t, p["lost"], name+".lost"); sent != ans+lost || sent == 0 {
			t.Errorf("%s: sent %v != answered %v + lost %v", name, sent, ans, lost)
		}
		served := num(t, p["served"], name+".served")
		if ans != served+sumObj(t, p["overload"], name)+sumObj(t, p["failed"], name) {
			t.Errorf("%s: answered %v, served %v", name, ans, served)
		}
		answered += ans
	}
	if r := num(t, rep["replies"], "replies"); r != answered {
		t.Errorf("replies %v, answered %v", r, answered)
	}
	return rep, stdout.String()
}

// The table's fixed lines and headings.
var overloadTableLines = []string{
	"levee overload test: run ", "request timeout ",
	"phase", "latency of served requests, from the send", "capacity C ", "capacity search ",
	"baseline ", "baseline by criticality ", "overload offered ", "overload goodput ", "overload p99 served ",
	"overload p99 from due ", "overload outcomes ", "overload by criticality ", "overload in flight ",
	"replies (all phases) ", "processes (RSS; CPU in cores", "criteria",
}

func checkTableLines(t *testing.T, table string, want []string) {
	t.Helper()
	lines := strings.Split(table, "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(strings.TrimSpace(l), strings.TrimSpace(w))
		}
		if !found {
			t.Errorf("table lacks a line starting %q:\n%s", w, table)
		}
	}
}

func TestOverloadReportShape(t *testing.T) {
	_, table := overloadShape(t)
	checkTableLines(t, table, overloadTableLines)
}

func smokeShape(t *testing.T, extra ...string) (map[string]any, string) {
	t.Helper()
	g := clienttest.NewGate([]byte("s3cret"), clienttest.Game)
	defer g.Close()
	out := filepath.Join(t.TempDir(), "smoke.json")
	var stdout, stderr bytes.Buffer
	code := run(append(append(short(g.URL()), "-bots", "4", "-json-out", out), extra...), env(nil), &stdout, &stderr)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr.String())
	}
	rep := checkShape(t, data, "testdata/smoke_report.shape")
	sent, ans := num(t, rep["sent"], "sent"), num(t, rep["answered"], "answered")
	if lost := sumObj(t, rep["lost"], "lost"); sent != ans+lost || sent == 0 {
		t.Errorf("sent %v != answered %v + lost %v", sent, ans, lost)
	}
	opSent := 0.0
	for name, o := range obj(t, rep["ops"], "ops") {
		opSent += num(t, obj(t, o, name)["sent"], "ops."+name+".sent")
	}
	if opSent != sent {
		t.Errorf("ops sent %v, sent %v", opSent, sent)
	}
	if code != 0 || !strings.Contains(stdout.String(), "\nPASS") {
		t.Errorf("exit %d\n%s", code, stdout.String())
	}
	return rep, stdout.String()
}

var smokeTableLines = []string{
	"levee load test: scenario smoke, run ", "elapsed ", "operation", "all ", "business errors ", "overload ",
	"failed ", "lost ", "dial failures ", "disconnects ", "stray replies ", "sdk retries ", "throughput ",
}

func TestSmokeReportShape(t *testing.T) {
	_, table := smokeShape(t)
	checkTableLines(t, table, smokeTableLines)
}

// lineShape runs a small line scenario (a FIFO line, no pace configured)
// with extra flags and checks its JSON report against the golden shape
// and its invariants; it returns the report and the table.
func lineShape(t *testing.T, extra ...string) (map[string]any, string) {
	t.Helper()
	fl := &fifoLine{}
	g := clienttest.NewGateWithLine([]byte("s3cret"), fl.line, clienttest.Game)
	defer g.Close()
	out := filepath.Join(t.TempDir(), "line.json")
	args := []string{"-scenario", "line", "-gate-url", g.URL(), "-token-secret", "s3cret", "-progress", "0",
		"-bots", "12", "-dial-parallel", "4", "-bound", "20s", "-json-out", out}
	var stdout, stderr bytes.Buffer
	code := run(append(args, extra...), env(nil), &stdout, &stderr)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr.String())
	}
	rep := checkShape(t, data, "testdata/line_report.shape")

	// Invariants: the verdict is the criteria's and the exit code's; the
	// criteria are these, in this order (no pace known: none judged); the
	// bots add up.
	var keys []string
	all := true
	for _, c := range rep["criteria"].([]any) {
		c := obj(t, c, "criteria[]")
		keys = append(keys, c["key"].(string))
		all = all && c["pass"].(bool)
	}
	if want := []string{"completed", "joined", "lost", "order", "status_gap"}; !slices.Equal(keys, want) {
		t.Errorf("criteria keys %v, want %v", keys, want)
	}
	if passed := rep["passed"].(bool); passed != all || (code == 0) != passed || !passed {
		t.Errorf("passed %v, criteria all pass %v, exit %d\n%s", passed, all, code, stdout.String())
	}
	bots, welcomed := num(t, rep["bots"], "bots"), num(t, rep["welcomed"], "welcomed")
	if lost := num(t, rep["lost"], "lost"); bots != welcomed+lost || bots != 12 {
		t.Errorf("bots %v != welcomed %v + lost %v", bots, welcomed, lost)
	}
	if w := num(t, obj(t, rep["wait"], "wait")["count"], "wait.count"); w != num(t, rep["admitted"], "admitted") {
		t.Errorf("wait count %v, admitted %v", w, rep["admitted"])
	}
	return rep, stdout.String()
}

var lineTableLines = []string{
	"levee line test: run ", "12 bots at once (4 handshakes at a time), bound ", "bots ", "arrival ", "order ", "pace ", "per window ", "wait ",
	"statuses ", "load tool ", "criteria",
}

func TestLineReportShape(t *testing.T) {
	_, table := lineShape(t)
	checkTableLines(t, table, lineTableLines)
}

// holdMetricsStub is a /metrics page with the Go runtime figures the hold
// scenario reads.
func holdMetricsStub(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "go_goroutines 40\ngo_memstats_heap_inuse_bytes 4e+06\ngo_memstats_stack_inuse_bytes 1e+06\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// holdShape runs a small hold scenario (players waiting in a line that
// never admits, the RSS of this process) with extra flags and checks its
// JSON report against the golden shape and its invariants.
func holdShape(t *testing.T, extra ...string) (map[string]any, string) {
	t.Helper()
	g := clienttest.NewGateWithLine([]byte("s3cret"), func(c *clienttest.Conn) bool {
		_ = c.Send(clienttest.Status(1, 1, 0, "t"))
		<-c.Context().Done()
		return false
	}, clienttest.Game)
	defer g.Close()
	out := filepath.Join(t.TempDir(), "hold.json")
	args := []string{"-scenario", "hold", "-gate-url", g.URL(), "-token-secret", "s3cret", "-progress", "0",
		"-conns", "10", "-hold", "300ms", "-hold-settle", "100ms", "-sample-every", "20ms",
		"-target-pid", strconv.Itoa(os.Getpid()), "-metrics-urls", holdMetricsStub(t), "-json-out", out}
	var stdout, stderr bytes.Buffer
	code := run(append(args, extra...), env(nil), &stdout, &stderr)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr.String())
	}
	rep := checkShape(t, data, "testdata/hold_report.shape")
	conns, held := num(t, rep["conns"], "conns"), num(t, rep["held"], "held")
	if failed := sumObj(t, rep["failures"], "failures"); conns != held+failed || conns != 10 {
		t.Errorf("conns %v != held %v + failed %v", conns, held, failed)
	}
	if d := num(t, rep["dropped"], "dropped"); d != sumObj(t, rep["drop_reasons"], "drop_reasons") {
		t.Errorf("dropped %v, reasons %v", d, rep["drop_reasons"])
	}
	passed := rep["passed"].(bool)
	if (code == 0) != passed || !passed || num(t, rep["samples"], "samples") == 0 || num(t, rep["goroutines"], "goroutines") != 40 {
		t.Errorf("passed %v, exit %d, report %v\n%s", passed, code, rep, stdout.String())
	}
	return rep, stdout.String()
}

var holdTableLines = []string{
	"levee hold test: run ", "10 players waiting in the gate's line, up in ", "held 10, dropped 0",
	"server pid ", "server's Go runtime at the end: ",
}

func TestHoldReportShape(t *testing.T) {
	_, table := holdShape(t)
	checkTableLines(t, table, holdTableLines)
}
