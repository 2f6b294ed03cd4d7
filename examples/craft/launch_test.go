package craft_test

import (
	"os"
	"testing"

	"example.com/craft"
	"github.com/leveehq/levee/loadtest/scenario"
)

// TestLaunchScenarioFitsTheGame checks launch.yaml as the load tool will:
// its language, and every request template against craft's declaration
// (an unknown action or field, a value that does not fit).
func TestLaunchScenarioFitsTheGame(t *testing.T) {
	data, err := os.ReadFile("launch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse("launch.yaml", data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Bind(craft.Game().Def()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range sc.Players.Actions {
		seen[a.Do] = true
	}
	for _, a := range craft.Game().Def().Actions() {
		if !seen[a.Name] {
			t.Errorf("launch day never plays %s", a.Name)
		}
	}
}
