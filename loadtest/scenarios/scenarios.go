// Package scenarios holds the preset load-test scenarios (launch, smoke,
// overload, line, hold), embedded, with README.md documenting the
// scenario language and examples/ showing a replayed launch. Package
// loadtest/scenario reads them.
package scenarios

import "embed"

// FS holds the presets: NAME.yaml for each.
//
//go:embed *.yaml
var FS embed.FS
