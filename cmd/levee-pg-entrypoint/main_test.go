package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func noFile(string) ([]byte, error) { return nil, os.ErrNotExist }

func TestConfigDefaults(t *testing.T) {
	c, err := configFrom(env(map[string]string{"POSTGRES_PASSWORD": "pw"}), noFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.dataDir != "/var/lib/postgresql/data" || c.user != "postgres" || c.db != "postgres" || c.password != "pw" {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = configFrom(env(map[string]string{"POSTGRES_PASSWORD": "pw", "POSTGRES_USER": "levee", "PGDATA": "/d",
		"POSTGRES_INITDB_ARGS": " --data-checksums  -k "}), noFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.db != "levee" || c.dataDir != "/d" || !slices.Equal(c.initdbArgs, []string{"--data-checksums", "-k"}) {
		t.Fatalf("POSTGRES_DB defaults to POSTGRES_USER, initdb args split: %+v", c)
	}
}

func TestPasswordFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(f, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := configFrom(env(map[string]string{"POSTGRES_PASSWORD_FILE": f}), os.ReadFile)
	if err != nil || c.password != "s3cret" {
		t.Fatalf("password %q, err %v: want the file's line without its newline", c.password, err)
	}
}

func TestConfigRefuses(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"no password":    {},
		"both":           {"POSTGRES_PASSWORD": "a", "POSTGRES_PASSWORD_FILE": "/f"},
		"missing file":   {"POSTGRES_PASSWORD_FILE": "/no/such/file"},
		"newline inside": {"POSTGRES_PASSWORD": "a\nb"},
	} {
		if _, err := configFrom(env(m), noFile); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	_, err := configFrom(env(map[string]string{"POSTGRES_PASSWORD_FILE": "/f"}), noFile)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v does not wrap the read error", err)
	}
}

func TestArgs(t *testing.T) {
	if got := serverArgs("/d", []string{"postgres", "-c", "fsync=off"}); !slices.Equal(got, []string{"-D", "/d", "-c", "listen_addresses=*", "-c", "jit=off", "-c", "fsync=off"}) {
		t.Errorf("serverArgs: %q", got)
	}
	if got := serverArgs("/d", nil); !slices.Equal(got, []string{"-D", "/d", "-c", "listen_addresses=*", "-c", "jit=off"}) {
		t.Errorf("serverArgs without a command: %q", got)
	}
	a := strings.Join(initdbArgs(config{dataDir: "/d", user: "levee", initdbArgs: []string{"-k"}}, "/t/pw"), " ")
	for _, want := range []string{"-D /d", "-U levee", "--pwfile /t/pw", "--auth-host=scram-sha-256", "--auth-local=trust"} {
		if !strings.Contains(a, want) {
			t.Errorf("initdb args %q lack %q", a, want)
		}
	}
	if !strings.HasSuffix(a, " -k") {
		t.Errorf("initdb args %q: POSTGRES_INITDB_ARGS not last", a)
	}
	if q := quoteIdent(`a"b`); q != `"a""b"` {
		t.Errorf("quoteIdent: %s", q)
	}
}

func TestLookupUser(t *testing.T) {
	p := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(p, []byte("root:x:0:0::/:/x\npostgres:x:999:998::/var/lib/postgresql:/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uid, gid, err := lookupUser(p, "postgres")
	if err != nil || uid != 999 || gid != 998 {
		t.Fatalf("postgres: %d %d %v", uid, gid, err)
	}
	if _, _, err := lookupUser(p, "root"); err == nil {
		t.Error("root: no error; the entrypoint must never run PostgreSQL as uid 0")
	}
	if _, _, err := lookupUser(p, "nobody"); err == nil {
		t.Error("a missing user: no error")
	}
}
