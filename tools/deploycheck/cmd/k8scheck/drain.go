package main

// Drain and disruption on the real API (issue 12, item 3), on the base
// overlay with its 3 gate pods Ready:
//
//   - pdb: evict a gate pod through the Eviction API: allowed (the PDB
//     allows 1 disruption); while it is still terminating, evict a second:
//     refused, 429 TooManyRequests; the PDB's status says 0 disruptions
//     allowed, and after the controller's recount the second eviction is
//     refused again.
//   - endpoints: delete a gate pod; while it still exists with a
//     deletionTimestamp, the EndpointSlices of the Services gate and
//     gate-admin list its endpoint ready false, terminating true; let it
//     go: it disappears and the Deployment is back to 3 Ready.
//
// kwok has no kubelet: its pod-delete stage deletes a pod with a
// deletionTimestamp at once (grace 0), so nothing would stay Terminating as
// with the gate's terminationGracePeriodSeconds. A finalizer of our own
// (-finalizer), put on the pod before it is evicted or deleted, holds it
// Terminating for as long as a check needs; the check removes it.
//
// The nodes are cordoned during the PDB check, as kubectl drain does: the
// ReplicaSet replaces an evicted pod at once, and under kwok the
// replacement would be Ready within a second, giving the budget its
// disruption back, so whether the second eviction were refused would be a
// race. Cordoned, the replacement stays Pending, which the PDB does not
// count as healthy.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leveehq/levee/tools/deploycheck/live"
)

// budgetRefusal is how the API server refuses an eviction for a PDB.
const budgetRefusal = "Cannot evict pod as it would violate the pod's disruption budget"

type drain struct {
	*cluster
	wait      time.Duration
	finalizer string
	nodes     string // the label selector of the nodes cordoned
	replicas  int32
}

func cmdDrain(ctx context.Context, c *cluster, args []string) error {
	fs, kc := c.flags("drain")
	d := &drain{cluster: c}
	allowed := fs.Int("allowed", 1, "the `disruptions` the PDB gate allows with every gate Ready")
	only := fs.String("only", "", "run only this `part`: pdb (the eviction check), steady (wait for the gate to be steady), release (take the finalizer off every pod, uncordon)")
	fs.DurationVar(&d.wait, "wait", 60*time.Second, "how long each of the checks' waits may take")
	fs.StringVar(&d.finalizer, "finalizer", "k8s-test.levee/hold", "the `finalizer` that holds a pod Terminating")
	fs.StringVar(&d.nodes, "nodes", "type=kwok", "the label `selector` of the nodes cordoned during the PDB check")
	rep := fs.Int("replicas", 3, "the gate's `replicas`")
	if err := c.connect(fs, kc, args); err != nil {
		return err
	}
	d.replicas = int32(*rep)
	a := int32(*allowed)
	t0 := time.Now()
	switch *only {
	case "":
		if err := d.pdb(ctx, a); err != nil {
			return err
		}
		if err := d.endpoints(ctx); err != nil {
			return err
		}
		c.logf("drain checks passed in %s", secs(time.Since(t0)))
		return nil
	case "pdb":
		return d.pdb(ctx, a)
	case "steady":
		return d.waitFor(ctx, d.wait, fmt.Sprintf("drain: gate steady, the PDB allowing %d", a), d.steady(a))
	case "release":
		if err := d.release(ctx); err != nil {
			return err
		}
		return d.cordon(ctx, false)
	}
	return fmt.Errorf("%w: -only %q: want pdb, steady or release", errUsage, *only)
}

func secs(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

func (d *drain) steady(allowed int32) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		s, err := d.state(ctx)
		if err != nil {
			return nil, err
		}
		return live.GateSteady(s, d.replicas, allowed, d.finalizer), nil
	}
}

func (d *drain) podGone(pod string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return []string{fmt.Sprintf("Pod %s/%s: still there, finalizers %v", d.ns, pod, p.Finalizers)}, nil
	}
}

// readyGates are two or more Ready gate pods.
func (d *drain) readyGates(ctx context.Context) ([]string, error) {
	s, err := d.state(ctx)
	if err != nil {
		return nil, err
	}
	pods := live.ReadyGates(s)
	if len(pods) < 2 {
		return nil, fmt.Errorf("Deployment %s/gate: %d Ready gate pods, the drain checks need 2", d.ns, len(pods))
	}
	return pods, nil
}

func (d *drain) pdb(ctx context.Context, allowed int32) error {
	t0 := time.Now()
	if err := d.waitFor(ctx, d.wait, "drain: gate steady before the eviction", d.steady(allowed)); err != nil {
		return err
	}
	pods, err := d.readyGates(ctx)
	if err != nil {
		return err
	}
	first, second := pods[0], pods[1]
	if err := d.cordon(ctx, true); err != nil {
		return err
	}
	if err := d.hold(ctx, first); err != nil {
		return err
	}
	if err := d.evict(ctx, first); err != nil {
		return fmt.Errorf("PodDisruptionBudget %s/gate: eviction of %s/%s refused with all %d gate pods Ready; want it allowed (maxUnavailable 1): %w", d.ns, d.ns, first, d.replicas, err)
	}
	d.logf("drain: evicted %s/%s (Eviction API, allowed: the PDB allowed %d disruption); held Terminating by the finalizer %s", d.ns, first, allowed, d.finalizer)
	// At once: the eviction itself took the budget's one disruption.
	answer, err := d.refused(ctx, second, fmt.Sprintf("right after %s/%s's", d.ns, first))
	if err != nil {
		return err
	}
	d.logf("drain: second eviction, of %s/%s, refused: %s", d.ns, second, answer)
	counted := func(ctx context.Context) ([]string, error) {
		s, err := d.state(ctx)
		if err != nil {
			return nil, err
		}
		return live.PDBCountsOut(s, first, d.replicas), nil
	}
	if err := d.waitFor(ctx, d.wait, fmt.Sprintf("drain: PodDisruptionBudget %s/gate counting %s/%s out", d.ns, d.ns, first), counted); err != nil {
		return err
	}
	b, err := d.cs.PolicyV1().PodDisruptionBudgets(d.ns).Get(ctx, live.Gate, metav1.GetOptions{})
	if err != nil {
		return err
	}
	status := fmt.Sprintf("expectedPods %d, currentHealthy %d, desiredHealthy %d, disruptionsAllowed %d",
		b.Status.ExpectedPods, b.Status.CurrentHealthy, b.Status.DesiredHealthy, b.Status.DisruptionsAllowed)
	// Again once the disruption controller has recounted.
	if _, err := d.refused(ctx, second, "after the controller's recount: "+status); err != nil {
		return err
	}
	d.logf("drain: PodDisruptionBudget %s/gate while %s/%s terminates: %s; %s/%s's eviction refused again (TooManyRequests)", d.ns, d.ns, first, status, d.ns, second)
	if err := d.release(ctx); err != nil {
		return err
	}
	if err := d.waitFor(ctx, d.wait, fmt.Sprintf("drain: %s/%s gone once released", d.ns, first), d.podGone(first)); err != nil {
		return err
	}
	if err := d.cordon(ctx, false); err != nil {
		return err
	}
	if err := d.waitFor(ctx, d.wait, "drain: gate back to 3 Ready after the eviction", d.steady(1)); err != nil {
		return err
	}
	d.logf("drain: %s/%s gone, gate back to %d/%d Ready, PDB allows 1 again (%s)", d.ns, first, d.replicas, d.replicas, secs(time.Since(t0)))
	return nil
}

func (d *drain) endpoints(ctx context.Context) error {
	t0 := time.Now()
	if err := d.waitFor(ctx, d.wait, "drain: gate steady before the deletion", d.steady(1)); err != nil {
		return err
	}
	pods, err := d.readyGates(ctx)
	if err != nil {
		return err
	}
	pod := pods[0]
	if err := d.hold(ctx, pod); err != nil {
		return err
	}
	del := time.Now()
	if err := d.cs.CoreV1().Pods(d.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting Pod %s/%s: %w", d.ns, pod, err)
	}
	var last *live.State
	terminating := func(ctx context.Context) ([]string, error) {
		s, err := d.state(ctx)
		if err != nil {
			return nil, err
		}
		last = s
		return live.EndpointsTerminating(s, pod), nil
	}
	if err := d.waitFor(ctx, d.wait, fmt.Sprintf("drain: the endpoints of the terminating pod %s/%s not ready", d.ns, pod), terminating); err != nil {
		return err
	}
	ms := time.Since(del).Milliseconds()
	grace := "?"
	for _, p := range last.Pods {
		if p.Name == pod && p.DeletionGracePeriodSeconds != nil {
			grace = fmt.Sprint(*p.DeletionGracePeriodSeconds)
		}
	}
	d.logf("drain: deleted %s/%s (kwok deleted it again at once, grace now %ss; the finalizer holds it); within %dms, the pod still there, its endpoints: %s",
		d.ns, pod, grace, ms, live.EndpointConditions(last, pod))
	if err := d.release(ctx); err != nil {
		return err
	}
	if err := d.waitFor(ctx, d.wait, fmt.Sprintf("drain: %s/%s gone once released", d.ns, pod), d.podGone(pod)); err != nil {
		return err
	}
	if err := d.waitFor(ctx, d.wait, "drain: gate back to 3 Ready after the deletion", d.steady(1)); err != nil {
		return err
	}
	d.logf("drain: %s/%s gone, its endpoints with it, gate back to %d/%d Ready (%s)", d.ns, pod, d.replicas, d.replicas, secs(time.Since(t0)))
	return nil
}

// evict asks the Eviction API (policy/v1) to evict pod.
func (d *drain) evict(ctx context.Context, pod string) error {
	return d.cs.PolicyV1().Evictions(d.ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: d.ns},
	})
}

// refused evicts pod, which the budget must refuse: HTTP 429
// TooManyRequests with the budget's message; it returns the answer. when
// says when, for the failure message.
func (d *drain) refused(ctx context.Context, pod, when string) (string, error) {
	err := d.evict(ctx, pod)
	switch {
	case err == nil:
		return "", fmt.Errorf("PodDisruptionBudget %s/gate: second eviction of %s/%s (%s) was allowed; want 429 TooManyRequests", d.ns, d.ns, pod, when)
	case !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), budgetRefusal):
		return "", fmt.Errorf("PodDisruptionBudget %s/gate: second eviction of %s/%s (%s) was refused, but not with 429 TooManyRequests for the budget: %w", d.ns, d.ns, pod, when, err)
	}
	return "429 TooManyRequests: " + err.Error(), nil
}

// hold puts the finalizer on pod, which must have none.
func (d *drain) hold(ctx context.Context, pod string) error {
	p, err := d.cs.CoreV1().Pods(d.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(p.Finalizers) > 0 {
		return fmt.Errorf("Pod %s/%s: has finalizers already (%v); the drain checks put their own on gate pods", d.ns, pod, p.Finalizers)
	}
	return d.setFinalizers(ctx, pod, []string{d.finalizer})
}

func (d *drain) setFinalizers(ctx context.Context, pod string, fins []string) error {
	if fins == nil {
		fins = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fins}})
	if err != nil {
		return err
	}
	if _, err := d.cs.CoreV1().Pods(d.ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("Pod %s/%s: setting finalizers %v: %w", d.ns, pod, fins, err)
	}
	return nil
}

// release takes the finalizer off every pod in the namespace that has it.
func (d *drain) release(ctx context.Context) error {
	l, err := d.cs.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range l.Items {
		if i := slices.Index(p.Finalizers, d.finalizer); i >= 0 {
			if err := d.setFinalizers(ctx, p.Name, slices.Delete(slices.Clone(p.Finalizers), i, i+1)); err != nil {
				return err
			}
		}
	}
	return nil
}

// cordon marks the nodes unschedulable (or schedulable again).
func (d *drain) cordon(ctx context.Context, on bool) error {
	l, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: d.nodes})
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
	for _, n := range l.Items {
		if _, err := d.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("Node %s: unschedulable %t: %w", n.Name, on, err)
		}
	}
	return nil
}
