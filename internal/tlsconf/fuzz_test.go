package tlsconf_test

import (
	"crypto/x509"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/leveehq/levee/internal/tlsconf"
)

// RoleOf reads a peer's role from its URI SANs, which the peer chooses:
// whatever they are, it returns one known role whose URI is exactly one
// of them, or ErrWrongRole.
func FuzzRoleOf(f *testing.F) {
	for _, s := range []string{"spiffe://levee/gate", "spiffe://levee/logic\nspiffe://levee/gate", "spiffe://levee/", "spiffe://levee/gate/x",
		"spiffe://other/gate", "SPIFFE://levee/gate", "spiffe://levee/ops?x=1", "spiffe://levee/%67ate", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uris string) {
		cert := &x509.Certificate{}
		for _, s := range strings.Split(uris, "\n") {
			if u, err := url.Parse(s); err == nil {
				cert.URIs = append(cert.URIs, u)
			}
		}
		r, err := tlsconf.RoleOf(cert)
		if err != nil {
			if !errors.Is(err, tlsconf.ErrWrongRole) {
				t.Fatalf("error %v does not wrap ErrWrongRole", err)
			}
			return
		}
		if !slices.Contains(tlsconf.Roles, r) {
			t.Fatalf("unknown role %q accepted", r)
		}
		n := 0
		for _, u := range cert.URIs {
			if u.String() == r.URI() {
				n++
			}
		}
		if n == 0 {
			t.Fatalf("role %q without its URI in %v", r, cert.URIs)
		}
	})
}
