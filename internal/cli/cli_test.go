package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParseEnvFallbackAndPrecedence(t *testing.T) {
	env := map[string]string{"GATE_MAX_CONNS": "10", "GATE_ADDR": ":1"}
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	n := fs.Int("max-conns", 5, "")
	addr := fs.String("addr", ":0", "")
	if err := Parse(fs, "GATE", []string{"-addr", ":2"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if *n != 10 || *addr != ":2" {
		t.Fatalf("max-conns=%d addr=%s: env fills unset flags, command line wins", *n, *addr)
	}
}

func TestParseBadEnvNamesTheFlag(t *testing.T) {
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("max-conns", 5, "")
	err := Parse(fs, "GATE", nil, func(k string) string {
		if k == "GATE_MAX_CONNS" {
			return "lots"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "-max-conns") || !strings.Contains(err.Error(), "GATE_MAX_CONNS") {
		t.Fatalf("err = %v", err)
	}
}

func TestList(t *testing.T) {
	var l List
	if err := l.Set(" a:1, b:2 ,,c:3"); err != nil || strings.Join(l, "|") != "a:1|b:2|c:3" || l.String() != "a:1,b:2,c:3" {
		t.Fatalf("Set: %v %q", err, l)
	}
	if err := l.Set(" ,"); err == nil {
		t.Fatal("empty list accepted")
	}
}
