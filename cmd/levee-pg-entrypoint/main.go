// Command levee-pg-entrypoint is the entrypoint of the offline PostgreSQL
// image levee/postgres (scripts/postgres-image.sh): that image is FROM
// scratch, with the host's Debian PostgreSQL 15 binaries and their shared
// libraries, and no shell to run an entrypoint script in. It takes the
// official postgres image's variables, so docker-compose.yml's postgres
// service runs either image:
//
//	PGDATA                  data directory (/var/lib/postgresql/data)
//	POSTGRES_PASSWORD_FILE  file holding the superuser's password, or
//	POSTGRES_PASSWORD       the password itself (one of them is required)
//	POSTGRES_USER           superuser name (postgres)
//	POSTGRES_DB             database created at the first start (POSTGRES_USER)
//	POSTGRES_INITDB_ARGS    extra initdb arguments, split on spaces
//
// When PGDATA holds no cluster yet (no PG_VERSION) it runs initdb (UTF8,
// locale C, scram-sha-256 for connections over TCP, trust on the
// container's own Unix socket), lets every address in with
// scram-sha-256, creates POSTGRES_DB in single-user mode, and then, every
// time, execs postgres with listen_addresses='*', jit off and its own arguments
// (a leading "postgres" is dropped, as the official image does). Started as
// root it first hands PGDATA to the image's postgres user and drops to it:
// PostgreSQL refuses to run as root. Exit status 1 with a message on
// stderr when it cannot start.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// binDir is where the image (and Debian, and the official image) keeps
// PostgreSQL 15's programs.
const binDir = "/usr/lib/postgresql/15/bin"

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "levee-pg-entrypoint: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string) error {
	cfg, err := configFrom(getenv, os.ReadFile)
	if err != nil {
		return err
	}
	if os.Getuid() == 0 {
		if err := dropRoot(cfg.dataDir); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initCluster(cfg); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	argv := append([]string{"postgres"}, serverArgs(cfg.dataDir, args)...)
	return syscall.Exec(filepath.Join(binDir, "postgres"), argv, os.Environ())
}

type config struct {
	dataDir, user, db, password string
	initdbArgs                  []string
}

// configFrom reads the official image's variables.
func configFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (config, error) {
	c := config{
		dataDir:    or(getenv("PGDATA"), "/var/lib/postgresql/data"),
		user:       or(getenv("POSTGRES_USER"), "postgres"),
		initdbArgs: strings.Fields(getenv("POSTGRES_INITDB_ARGS")),
	}
	c.db = or(getenv("POSTGRES_DB"), c.user)
	switch f, p := getenv("POSTGRES_PASSWORD_FILE"), getenv("POSTGRES_PASSWORD"); {
	case f != "" && p != "":
		return c, errors.New("both POSTGRES_PASSWORD_FILE and POSTGRES_PASSWORD are set: set one")
	case f != "":
		b, err := readFile(f)
		if err != nil {
			return c, fmt.Errorf("POSTGRES_PASSWORD_FILE: %w", err)
		}
		c.password = strings.TrimRight(string(b), "\r\n")
	default:
		c.password = p
	}
	if c.password == "" {
		return c, errors.New("no superuser password: set POSTGRES_PASSWORD_FILE or POSTGRES_PASSWORD (scripts/compose.sh writes LEVEE_POSTGRES_PASSWORD into .env)")
	}
	if strings.ContainsAny(c.password, "\r\n") {
		return c, errors.New("the password holds a line break, which initdb's password file cannot carry")
	}
	return c, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// serverArgs are postgres's arguments: the data directory, every address,
// no JIT (the image leaves out llvmjit and libLLVM), then the container's
// command without a leading "postgres" (which may set them otherwise).
func serverArgs(dataDir string, args []string) []string {
	if len(args) > 0 && args[0] == "postgres" {
		args = args[1:]
	}
	return append([]string{"-D", dataDir, "-c", "listen_addresses=*", "-c", "jit=off"}, args...)
}

// initdbArgs is initdb's command line for cfg with the password in pwfile.
func initdbArgs(cfg config, pwfile string) []string {
	return append([]string{"-D", cfg.dataDir, "-U", cfg.user, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions"},
		cfg.initdbArgs...)
}

// hbaAll lets every address in with a password, as the official image's
// entrypoint does: the containers of the compose network reach the server
// from their own addresses, not from 127.0.0.1.
const hbaAll = "\n# levee-pg-entrypoint: every address, with a password\nhost all all all scram-sha-256\n"

func initCluster(cfg config) error {
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "initdb")
	if err != nil {
		return fmt.Errorf("a directory for initdb's password file (TMPDIR, /tmp): %w", err)
	}
	defer os.RemoveAll(tmp)
	pwfile := filepath.Join(tmp, "pw")
	if err := os.WriteFile(pwfile, []byte(cfg.password+"\n"), 0o600); err != nil {
		return err
	}
	if err := command(nil, filepath.Join(binDir, "initdb"), initdbArgs(cfg, pwfile)...); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(cfg.dataDir, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, hbaAll); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if cfg.db == "postgres" {
		return nil
	}
	// Single-user mode: no listener, one statement per line on stdin.
	stmt := fmt.Sprintf("CREATE DATABASE %s;\n", quoteIdent(cfg.db))
	return command(strings.NewReader(stmt), filepath.Join(binDir, "postgres"),
		"--single", "-D", cfg.dataDir, "-c", "listen_addresses=", "postgres")
}

// quoteIdent quotes a SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func command(stdin io.Reader, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	return nil
}

// dropRoot gives dataDir to the postgres user of /etc/passwd and becomes
// that user (every thread: Go's syscall.Setuid is process-wide on Linux).
func dropRoot(dataDir string) error {
	uid, gid, err := lookupUser("/etc/passwd", "postgres")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dataDir, uid, gid); err != nil {
		return err
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}

// lookupUser reads name's uid and gid from a passwd file (the image has
// no NSS beyond files, and this keeps the binary static).
func lookupUser(path, name string) (uid, gid int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 4 || fs[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(fs[2])
		gid, err2 := strconv.Atoi(fs[3])
		if err1 != nil || err2 != nil || uid == 0 {
			return 0, 0, fmt.Errorf("%s: bad entry for %s", path, name)
		}
		return uid, gid, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("%s: no user %s to run PostgreSQL as (it refuses root)", path, name)
}
