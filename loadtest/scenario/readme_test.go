package scenario

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/leveehq/levee/loadtest/fault"
	"github.com/leveehq/levee/loadtest/reqtmpl"
	"github.com/leveehq/levee/loadtest/threshold"
)

// TestReadmeDocumentsEverything checks that loadtest/scenarios/README.md
// names every field of the language and every threshold figure.
func TestReadmeDocumentsEverything(t *testing.T) {
	b, err := os.ReadFile("../scenarios/README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var walk func(tp reflect.Type, prefix string)
	walk = func(tp reflect.Type, prefix string) {
		for tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice {
			tp = tp.Elem()
		}
		if tp.Kind() != reflect.Struct || tp == durationType {
			return
		}
		for i := range tp.NumField() {
			name, _, _ := strings.Cut(tp.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, "`"+prefix+name+"`") &&
				!strings.Contains(doc, "."+name+"`") && !strings.Contains(doc, "`"+name+".") {
				t.Errorf("README does not document %s%s", prefix, name)
			}
			walk(tp.Field(i).Type, "")
		}
	}
	walk(reflect.TypeFor[Scenario](), "")
	for _, n := range append(append([]string{}, threshold.Scalars...), threshold.SeriesNames...) {
		if !strings.Contains(doc, "`"+n+"`") && !strings.Contains(doc, "`"+n+"`,") {
			t.Errorf("README does not document figure %s", n)
		}
	}
	for _, s := range append(append(append(append(append([]string{}, reqtmpl.Generators...), wrapped(reqtmpl.Placeholders)...), LineModes...), Criticalities...), fault.Kinds...) {
		if !strings.Contains(doc, "`"+s+"`") {
			t.Errorf("README does not mention %q", s)
		}
	}
	for _, p := range Presets() {
		if !strings.Contains(doc, "`"+p.Name+"`") {
			t.Errorf("README does not list preset %s", p.Name)
		}
	}
}

func wrapped(xs []string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, "{{"+x+"}}")
	}
	return out
}
