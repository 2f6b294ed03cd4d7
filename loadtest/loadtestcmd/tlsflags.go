package loadtestcmd

import (
	"flag"
	"fmt"
	"io"

	"github.com/leveehq/levee/loadtest/target"
)

// tlsFlags are the flags of run and capacity that say how the bots trust
// wss:// gates (one group, the same in both).
type tlsFlags struct {
	caFile       *string
	skipVerify   *bool
	sessionCache *bool
}

func addTLSFlags(fs *flag.FlagSet) tlsFlags {
	return tlsFlags{
		caFile:       fs.String("ca-file", "", "PEM file of the CA to trust for wss:// gates instead of the system roots (levee-certs' ca.crt); empty: the system roots"),
		skipVerify:   fs.Bool("insecure-skip-verify", false, "do not verify wss:// gates' certificates (a test gate only; prints a warning)"),
		sessionCache: fs.Bool("tls-session-cache", true, "resume TLS sessions: the bots of a process share one session cache per gate; false: every connection a full handshake (to measure its cost)"),
	}
}

// options checks the flags (the CA file is read) and warns on stderr about
// -insecure-skip-verify; an error is a usage error.
func (f tlsFlags) options(stderr io.Writer) (target.TLS, error) {
	t := target.TLS{CAFile: *f.caFile, InsecureSkipVerify: *f.skipVerify, NoSessionCache: !*f.sessionCache}
	if t.InsecureSkipVerify && t.CAFile != "" {
		return t, fmt.Errorf("-insecure-skip-verify and -ca-file: give one (a CA file is not used when nothing is verified)")
	}
	if _, err := t.Config(); err != nil {
		return t, err
	}
	if t.InsecureSkipVerify {
		fmt.Fprintln(stderr, target.InsecureWarning)
	}
	return t, nil
}
