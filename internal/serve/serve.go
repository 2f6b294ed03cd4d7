// Package serve runs Levee's gRPC and HTTP servers until their context ends,
// then shuts them down in order: report NOT_SERVING, stop taking new work,
// let in-flight work finish within a grace period, then force the rest.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
)

// GRPC serves srv on lis until ctx is done. On shutdown it sets hs (if not
// nil) to NOT_SERVING, waits `drain` so load balancers notice, then calls
// GracefulStop, and Stop if that takes longer than grace.
func GRPC(ctx context.Context, srv *grpc.Server, hs *health.Server, lis net.Listener, drain, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if hs != nil {
		hs.Shutdown()
	}
	if drain > 0 {
		t := time.NewTimer(drain)
		<-t.C
	}
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpc serve: %w", err)
	}
	return nil
}

// HTTP serves srv on lis until ctx is done, then shuts it down with a fresh
// timeout of grace (never the cancelled ctx).
func HTTP(ctx context.Context, srv *http.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http serve: %w", err)
	}
	return nil
}
