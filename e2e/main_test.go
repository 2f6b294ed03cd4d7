package e2e

import (
	"testing"

	"github.com/leveehq/levee/internal/pgtest"
)

// TestMain runs the tests with pgtest's shared PostgreSQL (started by the
// first test that asks for a database, pgcluster_test.go's) and stops it
// after the last test.
func TestMain(m *testing.M) { pgtest.Main(m) }
