// Command levee-certs writes a local certificate authority and the
// certificates a Levee cluster runs with into a directory (package
// internal/certgen): ca.crt/ca.key, one pair per cluster role
// (gate, logic, battle, ops; URI SAN spiffe://levee/<role> and the compose
// and Kubernetes service names as DNS SANs) and edge.crt/edge.key, the
// gate's public wss certificate (localhost, 127.0.0.1, ::1 and -edge-names).
//
//	levee-certs -out .certs [-edge-names game.example.com,10.0.0.5] [-force]
//
// An existing CA in the directory is reused (the leaves are renewed and
// still trusted by whoever holds ca.crt) unless -force. Exit status 2 on a
// bad flag or an unusable existing CA, 1 on any other failure.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leveehq/levee/internal/certgen"
	"github.com/leveehq/levee/internal/cli"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now())) }

func run(args []string, stdout, stderr io.Writer, now time.Time) int {
	fs := flag.NewFlagSet("levee-certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", ".certs", "directory to write the certificates and keys into (created when missing)")
	var edge cli.List
	fs.Var(&edge, "edge-names", "extra DNS names or IP addresses of the edge (wss) certificate, comma-separated (localhost, 127.0.0.1 and ::1 are always in it)")
	caValidity := fs.Duration("ca-validity", certgen.DefaultCAValidity, "validity of a new CA")
	validity := fs.Duration("validity", certgen.DefaultLeafValidity, "validity of the role and edge certificates (never past the CA's)")
	ns := fs.String("namespace", certgen.DefaultNamespace, "Kubernetes namespace whose service names go into the role certificates")
	force := fs.Bool("force", false, "mint a new CA even when -out has one (everything it signed stops being trusted)")
	group := fs.Bool("group-readable", false, "write the keys 0640 instead of 0600 (for containers that run as another uid with the files' group added)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: levee-certs [flags]\n\nWrites ca.crt/ca.key, gate, logic, battle and ops .crt/.key and edge.crt/.key into -out.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "levee-certs: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	res, err := certgen.Write(certgen.Options{
		Dir: *out, Now: now, CAValidity: *caValidity, LeafValidity: *validity,
		EdgeNames: edge, Namespace: *ns, Force: *force, GroupReadable: *group,
	})
	if err != nil {
		fmt.Fprintf(stderr, "levee-certs: %v\n", err)
		if errors.Is(err, certgen.ErrBadOptions) || errors.Is(err, certgen.ErrBadCA) {
			return 2
		}
		return 1
	}
	ca := "kept the CA in"
	if res.NewCA {
		ca = "new CA in"
	}
	fmt.Fprintf(stdout, "levee-certs: %s %s; wrote %d files (certificates valid %s)\n", ca, *out, len(res.Files), *validity)
	return 0
}
