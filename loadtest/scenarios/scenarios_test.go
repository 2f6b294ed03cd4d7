package scenarios_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leveehq/levee/examples/arena"
	"github.com/leveehq/levee/loadtest/scenario"
	"github.com/leveehq/levee/loadtest/scenarios"
)

// TestPresetsParse checks that every embedded preset is a valid scenario
// and that the five documented ones are there.
func TestPresetsParse(t *testing.T) {
	names, err := fs.Glob(scenarios.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hold-bare.yaml", "hold-line.yaml", "hold.yaml", "launch.yaml", "line.yaml", "overload.yaml", "smoke.yaml"}
	if !slices.Equal(names, want) {
		t.Fatalf("presets %v, want %v", names, want)
	}
	for _, n := range names {
		data, err := fs.ReadFile(scenarios.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := scenario.Parse(n, data, nil, func(string) ([]byte, error) { return nil, fs.ErrNotExist })
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if err := sc.Bind(arena.Game().Def()); err != nil {
			t.Errorf("%s against arena: %v", n, err)
		}
	}
}

// TestDrillsParse checks every drill of drills/ (make drills plays them)
// and what scripts/drills.sh counts on: each one but capacity and
// gate-restarted sizes its load as a multiple of capacity (offered: X,
// so that --set capacity=C sizes it), has fault steps, and (except the
// naive references) thresholds.
func TestDrillsParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("drills", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"battle-frozen", "battle-killed", "capacity", "cpu-squeeze-naive", "cpu-squeeze", "disk-full",
		"gate-restarted", "logic-killed", "logic-outage-naive", "logic-outage", "logic-pg-frozen", "logic-pg-killed",
		"logic-pg-scale-out", "postgres-restarted", "rolling-restart"}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	if !slices.Equal(names, want) {
		t.Fatalf("drills %v, want %v", names, want)
	}
	// make drills plays every drill: scripts/drills.sh's ALL lists them all.
	sh, err := os.ReadFile(filepath.Join("..", "..", "scripts", "drills.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(sh), "\nALL=(")
	all, _, _ := strings.Cut(rest, ")")
	listed := strings.Fields(all)
	slices.Sort(listed)
	drills := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "capacity" })
	slices.Sort(drills)
	if !slices.Equal(listed, drills) {
		t.Errorf("scripts/drills.sh ALL %v, want every drill %v", listed, drills)
	}
	for i, f := range files {
		name := names[i]
		sc, err := scenario.Load(f, nil)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := sc.Bind(arena.Game().Def()); err != nil {
			t.Errorf("%s against arena: %v", f, err)
		}
		if sc.Name != name {
			t.Errorf("%s: name %q", f, sc.Name)
		}
		if sized := sc.Offered > 0; sized != (name != "capacity" && name != "gate-restarted") {
			t.Errorf("%s: offered %v (every drill but capacity and gate-restarted is sized by it)", f, sc.Offered)
		}
		if name == "capacity" {
			continue
		}
		faults := 0
		for _, a := range sc.Timeline {
			if a.Fault != nil {
				faults++
			}
		}
		if faults == 0 {
			t.Errorf("%s: no fault step", f)
		}
		if len(sc.Checks) == 0 != strings.HasSuffix(name, "-naive") {
			t.Errorf("%s: %d thresholds (the naive references have none, every drill has some)", f, len(sc.Checks))
		}
	}
}

// TestArenaFilesBind checks the examples and the compose test's scenario
// against arena's declaration, as the default loadtest binary runs them.
func TestArenaFilesBind(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "scripts", "compose-test.yaml"), filepath.Join("..", "..", "scripts", "compose-test-postgres.yaml"))
	for _, f := range files {
		sc, err := scenario.Load(f, nil)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := sc.Bind(arena.Game().Def()); err != nil {
			t.Errorf("%s against arena: %v", f, err)
		}
	}
}
