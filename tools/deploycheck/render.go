package deploycheck

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// RenderTimeout bounds one `kubectl kustomize`.
const RenderTimeout = 60 * time.Second

// Render runs `kubectl kustomize dir` and returns the rendered YAML.
func Render(ctx context.Context, kubectl, dir string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, RenderTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Kustomizations lists the directories to render under a k8s/ tree: base
// and every overlays/* that holds a kustomization file.
func Kustomizations(k8sDir string) ([]string, error) {
	dirs := []string{filepath.Join(k8sDir, "base")}
	overlays, err := filepath.Glob(filepath.Join(k8sDir, "overlays", "*"))
	if err != nil {
		return nil, err
	}
	for _, o := range overlays {
		for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
			if ok, _ := filepath.Glob(filepath.Join(o, name)); len(ok) > 0 {
				dirs = append(dirs, o)
				break
			}
		}
	}
	return dirs, nil
}
