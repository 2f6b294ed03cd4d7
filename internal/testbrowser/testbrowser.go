// Package testbrowser finds and starts the headless Chromium that the
// browser tests drive (the waiting page's in e2e, the HTML report's in
// loadtest/report) through chromedp.
package testbrowser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Find returns the path of Debian's chromium. When it is missing the test
// is skipped, or fails when LEVEE_REQUIRE_BROWSER is set (make test sets
// it; scripts/ensure-chromium.sh installs the browser).
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LEVEE_REQUIRE_BROWSER") != "" {
		t.Fatal("LEVEE_REQUIRE_BROWSER is set but neither chromium nor chromium-browser is on PATH; run scripts/ensure-chromium.sh")
	}
	t.Skip("chromium is not installed: run scripts/ensure-chromium.sh (or set LEVEE_REQUIRE_BROWSER=1 to make this a failure)")
	return ""
}

// Start starts headless chromium at bin with a window of w x h, bounded
// by timeout in all, and returns the allocator context tabs are opened
// from. extra are more of chromium's options (e.g. a command-line flag).
// The test's cleanup kills the browser and waits for it, also when the
// test fails.
func Start(t testing.TB, bin string, w, h int, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(w, h))
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	return actx
}
