package deploycheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leveehq/levee/tools/deploycheck"
)

// kubectl finds kubectl, or skips the test when it is missing and
// LEVEE_REQUIRE_KUBECTL is unset (CI sets it, so there a missing kubectl
// fails instead).
func kubectl(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("LEVEE_REQUIRE_KUBECTL") != "" {
			t.Fatalf("LEVEE_REQUIRE_KUBECTL is set and kubectl is not on PATH: %v", err)
		}
		t.Skip("kubectl not on PATH (set LEVEE_REQUIRE_KUBECTL to make this a failure)")
	}
	return path
}

// repoRoot is the repository root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if !deploycheck.Exists(root, "go.mod") {
		t.Fatalf("%s has no go.mod: not the repository root", root)
	}
	return root
}

func report(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		t.Error(err)
	}
}

// TestRepoObservability checks the repository's rules file and dashboard.
func TestRepoObservability(t *testing.T) {
	root := repoRoot(t)
	for _, f := range []string{deploycheck.RulesFile, deploycheck.DashboardFile} {
		if !deploycheck.Exists(root, f) {
			t.Skipf("%s is not in this tree yet", f)
		}
	}
	_, errs := deploycheck.CheckObservability(root)
	report(t, errs)
}

// TestRepoK8s renders the repository's k8s/ base and overlays and runs
// every check on them, against the rules file.
func TestRepoK8s(t *testing.T) {
	root := repoRoot(t)
	if !deploycheck.Exists(root, deploycheck.K8sDir) || !deploycheck.Exists(root, deploycheck.RulesFile) {
		t.Skipf("%s or %s is not in this tree yet", deploycheck.K8sDir, deploycheck.RulesFile)
	}
	k := kubectl(t)
	rf, err := deploycheck.LoadRules(filepath.Join(root, deploycheck.RulesFile), deploycheck.RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rs, errs := deploycheck.RenderAll(context.Background(), k, root)
	report(t, errs)
	for _, r := range rs {
		kinds := map[string]int{}
		for _, o := range r.Objects {
			kinds[o.GVK.Kind]++
		}
		t.Logf("%s: %d objects %v", r.Dir, len(r.Objects), kinds)
	}
	report(t, deploycheck.CheckK8s(context.Background(), k, root, rf))
}
