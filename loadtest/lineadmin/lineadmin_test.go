package lineadmin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/lineapi"
	"github.com/leveehq/levee/loadtest/target"
)

// Get decodes the wire type the gate encodes, so a renamed or retyped
// field breaks the build or this test, not a run.
func TestGetDecodesTheView(t *testing.T) {
	room := 7
	want := lineapi.View{Mode: "auto", Rate: lineapi.RateView{N: 1000, Interval: "10s", PerSecond: 100}, Length: 3, AdmittedTotal: 12, Room: &room}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(want)
	}))
	defer srv.Close()
	got, err := (&Admin{URL: srv.URL}).Get(context.Background())
	if err != nil || got.Mode != want.Mode || got.Rate != want.Rate || got.Length != 3 || got.AdmittedTotal != 12 || got.Room == nil || *got.Room != 7 {
		t.Fatalf("Get: %+v, %v, want %+v", got, err, want)
	}
}

// Set posts the setting as a lineapi.Request with the bearer token; a
// refusal is an ErrAdmin with the status and the gate's message.
func TestSet(t *testing.T) {
	type call struct{ auth, ctype, body string }
	calls := make(chan call, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- call{r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)}
		if r.Header.Get("Authorization") != "Bearer right" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	a := &Admin{URL: srv.URL, Token: "right"}
	if err := a.Set(context.Background(), LineSetting{Mode: "paced", Rate: 5, Interval: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if c := <-calls; c.auth != "Bearer right" || c.ctype != "application/json" || c.body != `{"mode":"paced","rate":5,"interval":"2s"}` {
		t.Errorf("call %+v", c)
	}
	a.Token = "wrong"
	err := a.Set(context.Background(), LineSetting{Rate: 5, Interval: time.Second})
	if !errors.Is(err, ErrAdmin) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("err = %v, want ErrAdmin with 401 and the message", err)
	}
	if c := <-calls; c.body != `{"rate":5,"interval":"1s"}` {
		t.Errorf("body %s", c.body)
	}
}

func TestLineSetting(t *testing.T) {
	s := LineSetting{Mode: "paced", Rate: 1000, Interval: 10 * time.Second}
	if got := s.PerSecond(); got != 100 {
		t.Errorf("PerSecond = %v, want 100", got)
	}
	if got := s.String(); got != "mode paced, rate 1000, per 10s" {
		t.Errorf("String = %q", got)
	}
	if got := (LineSetting{Mode: "open"}).PerSecond(); got != 0 {
		t.Errorf("PerSecond without a rate = %v, want 0", got)
	}
}

// The default client dials only loopback.
func TestDefaultClientIsLoopbackOnly(t *testing.T) {
	_, err := (&Admin{URL: "http://10.0.0.1:1/admin/line"}).Get(context.Background())
	if !errors.Is(err, ErrAdmin) || !errors.Is(err, target.ErrNonLocal) {
		t.Fatalf("err = %v, want a refusal to dial a non-loopback address", err)
	}
}
