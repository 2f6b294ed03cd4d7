package scenarios_test

import (
	"io/fs"
	"slices"
	"testing"

	"levee/loadtest/scenario"
	"levee/loadtest/scenarios"
)

// TestPresetsParse checks that every embedded preset is a valid scenario
// and that the five documented ones are there.
func TestPresetsParse(t *testing.T) {
	names, err := fs.Glob(scenarios.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hold.yaml", "launch.yaml", "line.yaml", "overload.yaml", "smoke.yaml"}
	if !slices.Equal(names, want) {
		t.Fatalf("presets %v, want %v", names, want)
	}
	for _, n := range names {
		data, err := fs.ReadFile(scenarios.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := scenario.Parse(n, data, nil, func(string) ([]byte, error) { return nil, fs.ErrNotExist }); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}
