package report

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/leveehq/levee/internal/testbrowser"
)

// The browser test opens the HTML report of a two-run comparison in
// headless Chromium, as e2e/browser_test.go does, and checks that every
// plot rendered: each <svg> has a non-zero box and draws paths or lines,
// and the page asked the network for nothing.

// plotBox is what the page measures of one plot.
type plotBox struct {
	ID            string
	Width, Height float64
	Marks         int // path, line and polyline elements
}

const measurePlots = `Array.from(document.querySelectorAll("svg")).map(s => {
  const b = s.getBoundingClientRect();
  return {ID: s.id, Width: b.width, Height: b.height, Marks: s.querySelectorAll("path, line, polyline").length};
})`

func TestBrowserRendersEveryPlot(t *testing.T) {
	bin := testbrowser.Find(t)
	a := synthRun(t)
	b := synthRun(t)
	b.Meta.Label = "unprotected"
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, a, b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	actx := testbrowser.Start(t, bin, 1200, 900, 60*time.Second) // bounds the whole browser
	tab, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)

	var mu sync.Mutex
	var problems []string
	err = chromedp.Listen(tab, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
				msg = "network request: " + u
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + (&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error()
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				msg = string(e.Entry.Source) + " error: " + e.Entry.Text
			}
		}
		if msg != "" {
			mu.Lock()
			problems = append(problems, msg)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() { // reported also when a check below is fatal
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("page: %s", p)
		}
	})
	if err := chromedp.Do(tab, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("opening the report: %v", err)
	}
	boxes, err := chromedp.Run(tab, chromedp.Evaluate[[]plotBox](measurePlots))
	if err != nil {
		t.Fatalf("measuring the plots: %v", err)
	}
	if len(boxes) != len(charts) {
		t.Fatalf("%d plots in the page, want %d: %+v", len(boxes), len(charts), boxes)
	}
	for i, bx := range boxes {
		if bx.ID != "plot-"+charts[i].id {
			t.Errorf("plot %d is %q, want plot-%s", i, bx.ID, charts[i].id)
		}
		if bx.Width < 100 || bx.Height < 50 || bx.Marks == 0 {
			t.Errorf("plot %s did not render: %+v", bx.ID, bx)
		}
	}
}
