package logic

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine is still running after
// them: every goroutine has an owner that stops it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
