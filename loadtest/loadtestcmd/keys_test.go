package loadtestcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSigningKey(t *testing.T) {
	if kid, key, err := signingKey("s", ""); kid != "" || key != "s" || err != nil {
		t.Fatalf("no ring: %q %q %v", kid, key, err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	ring := `{"keys":[{"id":"old","secret":"0123456789abcdef"},{"id":"new","secret":"fedcba9876543210","current":true}]}`
	if err := os.WriteFile(path, []byte(ring), 0o600); err != nil {
		t.Fatal(err)
	}
	if kid, key, err := signingKey("s", path); kid != "new" || key != "fedcba9876543210" || err != nil {
		t.Fatalf("ring: %q %q %v", kid, key, err)
	}
	if _, _, err := signingKey("s", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "-token-keys") {
		t.Fatalf("missing ring: %v", err)
	}
}
