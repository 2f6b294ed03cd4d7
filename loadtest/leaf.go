package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"levee/loadtest/lineadmin"
	"levee/loadtest/record"
	"levee/loadtest/target"
)

// The old engines' names for what moved into the leaf packages the players
// engine stands on (levee/loadtest/record, target and lineadmin). They are
// aliases, not copies, and go with the old engines.

// Outcome classes: record's.
type (
	Class   = record.Class
	Outcome = record.Outcome
)

// The classes by their old names.
const (
	ClassOK       = record.OK
	ClassBusiness = record.Business
	ClassOverload = record.Refused
	ClassFailed   = record.Failed
	ClassLost     = record.Lost
)

// Lost reasons: record's.
const (
	LostTimeout     = record.LostTimeout
	LostClosed      = record.LostClosed
	LostInterrupted = record.LostInterrupted
	LostOther       = record.LostOther
)

// Classify is record.Classify.
func Classify(err error) Outcome { return record.Classify(err) }

// ErrNonLocal is target.ErrNonLocal.
var ErrNonLocal = target.ErrNonLocal

// Resolver is target.Resolver.
type Resolver = target.Resolver

// CheckTarget is target.CheckTarget.
func CheckTarget(ctx context.Context, rawURL string, res Resolver) error {
	return target.CheckTarget(ctx, rawURL, res)
}

func isLoopback(ip netip.Addr) bool { return target.IsLoopback(ip) }

func loopbackOnly(network, address string, c syscall.RawConn) error {
	return target.LoopbackOnly(network, address, c)
}

func checkLoopbackURL(ctx context.Context, flag, rawURL string, res Resolver) error {
	return target.CheckHTTP(ctx, flag, rawURL, res)
}

// The line admin client: lineadmin's.
type (
	Admin       = lineadmin.Admin
	LineSetting = lineadmin.LineSetting
)

// getPage reads url (a /metrics page) with a client that dials only
// loopback unless allowNonlocal.
func getPage(ctx context.Context, url string, allowNonlocal bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := target.HTTPClient(5*time.Second, allowNonlocal).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return body, err
}
