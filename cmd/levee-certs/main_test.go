package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".certs")
	var out, errb bytes.Buffer
	if rc := run([]string{"-out", dir, "-edge-names", "play.example.com"}, &out, &errb, time.Now()); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "new CA in") {
		t.Fatalf("stdout %q", out.String())
	}
	for _, f := range []string{"ca.crt", "ca.key", "gate.crt", "gate.key", "logic.crt", "logic.key", "battle.crt", "battle.key", "ops.crt", "ops.key", "edge.crt", "edge.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	out.Reset()
	if rc := run([]string{"-out", dir}, &out, &errb, time.Now()); rc != 0 || !strings.Contains(out.String(), "kept the CA") {
		t.Fatalf("second run: exit %d, %q", rc, out.String())
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); !bytes.Equal(ca, again) {
		t.Fatal("the second run replaced the CA")
	}
}

func TestBadFlagsExit2(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-nope"},
		{"-out", dir, "extra"},
		{"-out", dir, "-edge-names", "a b"},
		{"-out", dir, "-validity", "-1h"},
	} {
		var out, errb bytes.Buffer
		if rc := run(args, &out, &errb, time.Now()); rc != 2 {
			t.Errorf("%v: exit %d, want 2", args, rc)
		}
		if errb.Len() == 0 {
			t.Errorf("%v: no message", args)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused run wrote %d files", len(ents))
	}
}

func TestBrokenCAExit2(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("junk"), 0o644)
	var out, errb bytes.Buffer
	if rc := run([]string{"-out", dir}, &out, &errb, time.Now()); rc != 2 || !strings.Contains(errb.String(), "-force") {
		t.Fatalf("exit %d, %q", rc, errb.String())
	}
	if rc := run([]string{"-out", dir, "-force"}, &out, &errb, time.Now()); rc != 0 {
		t.Fatalf("-force: exit %d, %q", rc, errb.String())
	}
}
