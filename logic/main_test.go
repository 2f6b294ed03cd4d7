package logic

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leveehq/levee/internal/pgtest"
)

// TestMain fails the package's tests if a goroutine is still running after
// them: every goroutine has an owner that stops it. The PostgreSQL server
// the store tests share (package internal/pgtest) is stopped before that
// check.
func TestMain(m *testing.M) { goleak.VerifyTestMain(stopPostgres{m}) }

// stopPostgres runs the tests, then stops pgtest's shared server.
type stopPostgres struct{ m *testing.M }

func (s stopPostgres) Run() int {
	defer pgtest.StopShared()
	return s.m.Run()
}
