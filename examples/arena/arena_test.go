package arena_test

import (
	"testing"

	"github.com/leveehq/levee/examples/arena"
)

func TestDeclarationIsValid(t *testing.T) {
	if err := arena.Game().Validate(); err != nil {
		t.Fatal(err)
	}
}
