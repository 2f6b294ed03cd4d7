package gate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/lineapi"
)

// A lineapi.Request with every field set, as the load tool sends it, is
// read and parsed whole: the client's body and the gate's parser share the
// one field list.
func TestAdminTakesALineapiRequest(t *testing.T) {
	body, err := json.Marshal(lineapi.Request{
		Mode: "auto", Rate: 50, Interval: "5s", MaxLength: 1000, RetryAfter: "1m",
		AutoMinRate: 2, AutoMaxRate: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, lineapi.Path, strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	fields, err := readAdminFields(httptest.NewRecorder(), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != len(lineapi.Fields) {
		t.Fatalf("fields %v, want all of %v", fields, lineapi.Fields)
	}
	ch, err := parseLineChange(fields)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case ch.mode == nil || *ch.mode != "auto", ch.n == nil || *ch.n != 50,
		ch.interval == nil || *ch.interval != 5*time.Second, ch.maxLength == nil || *ch.maxLength != 1000,
		ch.retryAfter == nil || *ch.retryAfter != time.Minute,
		ch.autoMin == nil || *ch.autoMin != 2, ch.autoMax == nil || *ch.autoMax != 20:
		t.Errorf("change %+v does not hold the request %s", ch, body)
	}
}

func TestDefaultPushIsTheContractsDefault(t *testing.T) {
	if got := DefaultConfig().LinePush; got != lineapi.DefaultPush {
		t.Errorf("DefaultConfig().LinePush = %v, lineapi.DefaultPush = %v", got, lineapi.DefaultPush)
	}
}
