package lineapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Fields are Request's JSON names, in order: the list the gate accepts and
// the body the client sends cannot drift apart.
func TestFieldsAreRequestsJSONNames(t *testing.T) {
	rt := reflect.TypeOf(Request{})
	var names []string
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	if !reflect.DeepEqual(names, Fields) {
		t.Errorf("Request's JSON names %v, Fields %v", names, Fields)
	}
}

func TestRequestOmitsZeroFields(t *testing.T) {
	b, err := json.Marshal(Request{Rate: 5, Interval: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"rate":5,"interval":"1s"}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}

func TestMaxStatusInterval(t *testing.T) {
	if got, want := MaxStatusInterval(DefaultPush), 62*time.Second; got != want {
		t.Errorf("MaxStatusInterval(%v) = %v, want %v", DefaultPush, got, want)
	}
	if got, want := MaxStatusInterval(500*time.Millisecond), 15500*time.Millisecond; got != want {
		t.Errorf("MaxStatusInterval(500ms) = %v, want %v", got, want)
	}
}
