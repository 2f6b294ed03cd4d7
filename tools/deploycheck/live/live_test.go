package live

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "levee", Generation: 1}
}

func readyPod(name, app, ip string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "levee", Labels: map[string]string{GateLabel: app}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func endpoint(pod, ip string, ready, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Terminating: &terminating}}
}

func slice(svc string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	m := meta(svc + "-abc")
	m.Labels = map[string]string{ServiceNameLabel: svc}
	return discoveryv1.EndpointSlice{ObjectMeta: m, Endpoints: eps}
}

func hpaCond(t autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, reason string) autoscalingv2.HorizontalPodAutoscalerCondition {
	return autoscalingv2.HorizontalPodAutoscalerCondition{Type: t, Status: s, Reason: reason}
}

// healthy is the base overlay, cut down: a gate Deployment of 3 behind
// Services gate and gate-admin and a PDB, a logic StatefulSet of 1 with a
// claim, and battle's HPA at minReplicas.
func healthy() *State {
	gate := appsv1.Deployment{ObjectMeta: meta("gate"), Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, ReadyReplicas: 3, UpdatedReplicas: 3}}
	battle := appsv1.Deployment{ObjectMeta: meta("battle"), Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(5))},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, ReadyReplicas: 5, UpdatedReplicas: 5}}
	logic := appsv1.StatefulSet{ObjectMeta: meta("logic"), Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(1)),
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, ReadyReplicas: 1, UpdatedReplicas: 1}}
	hpa := autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta("battle"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "battle"},
		MinReplicas:    ptr(int32(5)), MaxReplicas: 30,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "battle_latency_seconds_p99"}}}}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 5, DesiredReplicas: 5, Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			hpaCond(autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale"),
			hpaCond(autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")}}}
	sel := map[string]string{GateLabel: "gate"}
	svc := func(name string) corev1.Service {
		return corev1.Service{ObjectMeta: meta(name), Spec: corev1.ServiceSpec{Selector: sel, Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt(8080)}}}}
	}
	s := &State{
		Deployments:  []appsv1.Deployment{gate, battle},
		StatefulSets: []appsv1.StatefulSet{logic},
		HPAs:         []autoscalingv2.HorizontalPodAutoscaler{hpa},
		Services:     []corev1.Service{svc("gate"), svc("gate-admin")},
		Pods:         []corev1.Pod{readyPod("gate-a", "gate", "10.244.0.1"), readyPod("gate-b", "gate", "10.244.0.2"), readyPod("gate-c", "gate", "10.244.0.3")},
		Claims: []corev1.PersistentVolumeClaim{{ObjectMeta: meta("data-logic-0"),
			Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: "pv-0", StorageClassName: ptr("standard")},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}},
		PDBs: []policyv1.PodDisruptionBudget{{ObjectMeta: meta("gate"),
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 3, CurrentHealthy: 3, DesiredHealthy: 2, DisruptionsAllowed: 1}}},
	}
	for _, name := range []string{"gate", "gate-admin"} {
		s.Slices = append(s.Slices, slice(name,
			endpoint("gate-a", "10.244.0.1", true, false), endpoint("gate-b", "10.244.0.2", true, false), endpoint("gate-c", "10.244.0.3", true, false)))
	}
	return s
}

func TestHealthyIsReady(t *testing.T) {
	if r := Ready(healthy(), Active); len(r) > 0 {
		t.Fatalf("a healthy state is not ready: %q", r)
	}
	if r := GateSteady(healthy(), 3, 1, "hold"); len(r) > 0 {
		t.Fatalf("a healthy gate is not steady: %q", r)
	}
}

// Each broken state fails Ready with one reason naming the object.
func TestReadyNamesTheObject(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(s *State)
		want   string
	}{
		{"a replica not ready", func(s *State) { s.Deployments[0].Status.ReadyReplicas = 2 },
			"Deployment levee/gate: 2/3 Ready, 3 updated"},
		{"below the HPA's minimum", func(s *State) { s.Deployments[1].Spec.Replicas = ptr(int32(1)) },
			"Deployment levee/battle: 1 replicas, below HorizontalPodAutoscaler battle's minReplicas 5"},
		{"not observed", func(s *State) { s.StatefulSets[0].Generation = 2 },
			"StatefulSet levee/logic: 1/1 Ready, 1 updated"},
		{"a selector matching nothing (--break selector)", func(s *State) {
			s.Services[1].Spec.Selector = map[string]string{GateLabel: "no-such-app"}
		}, "Service levee/gate-admin: its selector app.kubernetes.io/name=no-such-app matches no Ready pod"},
		{"an endpoint missing", func(s *State) { s.Slices[0].Endpoints = s.Slices[0].Endpoints[:2] },
			"Service levee/gate: 2 ready endpoints in its EndpointSlices, 3 Ready pods match app.kubernetes.io/name=gate"},
		{"a claim pending", func(s *State) { s.Claims[0].Status.Phase = corev1.ClaimPending },
			"PersistentVolumeClaim levee/data-logic-0: Pending"},
		{"a claim missing", func(s *State) { s.Claims = nil },
			"PersistentVolumeClaim levee/data-logic-0: missing"},
		{"a PDB not counting", func(s *State) { s.PDBs[0].Status.ExpectedPods = 2 },
			"PodDisruptionBudget levee/gate: expects 2 pods, 3 healthy, 3 match its selector"},
		{"an HPA not active", func(s *State) {
			s.HPAs[0].Status.Conditions[1] = hpaCond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetPodsMetric")
		}, "HorizontalPodAutoscaler levee/battle: ScalingActive False FailedGetPodsMetric: "},
		{"an HPA not evaluated", func(s *State) { s.HPAs[0].Status.Conditions = nil },
			"HorizontalPodAutoscaler levee/battle: AbleToScale not reported yet "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy()
			tc.break_(s)
			r := Ready(s, Active)
			if !slices.Contains(r, tc.want) {
				t.Fatalf("reasons %q, want %q among them", r, tc.want)
			}
		})
	}
}

func TestHPAUnavailable(t *testing.T) {
	s := healthy()
	if r := HPAs(s, Unavailable); len(r) != 1 || !strings.Contains(r[0], "expected False with FailedGet...Metric") {
		t.Fatalf("an active HPA in phase 1: %q", r)
	}
	s.HPAs[0].Status.Conditions[1] = hpaCond(autoscalingv2.ScalingActive, corev1.ConditionFalse, "FailedGetPodsMetric")
	if r := HPAs(s, Unavailable); len(r) != 0 {
		t.Fatalf("phase 1, metrics unavailable: %q", r)
	}
	if _, err := ParseHPAExpect("activ"); err == nil {
		t.Fatal("ParseHPAExpect(activ): no error")
	}
}

// --break metric: an HPA metric nothing serves is named, with the HPA.
func TestHPAMetrics(t *testing.T) {
	s := healthy()
	served := []string{"battle_latency_seconds_p99", "battle_pressure"}
	if r := HPAMetrics(s.HPAs, served, "the adapter rules serve"); len(r) > 0 {
		t.Fatalf("served metric reported: %q", r)
	}
	s.HPAs[0].Spec.Metrics = append(s.HPAs[0].Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "battle_no_such_metric"}}})
	want := "HorizontalPodAutoscaler levee/battle names metric battle_no_such_metric, which nothing serves (the adapter rules serve: battle_latency_seconds_p99, battle_pressure)"
	if r := HPAMetrics(s.HPAs, served, "the adapter rules serve"); !slices.Equal(r, []string{want}) {
		t.Fatalf("got %q, want %q", r, want)
	}
}

// The adapter rules shipped in k8s/ name the HPA's two metrics.
func TestAdapterRuleNames(t *testing.T) {
	file := filepath.Join("..", "..", "..", "k8s", "overlays", "prometheus-adapter", "adapter-rules.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	names, err := AdapterRuleNames(file, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"battle_latency_seconds_p99", "battle_pressure"}; !slices.Equal(names, want) {
		t.Fatalf("got %q, want %q", names, want)
	}
	if _, err := AdapterRuleNames("x.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); err == nil {
		t.Fatal("no rules: no error")
	}
}

func TestDiscoveredMetrics(t *testing.T) {
	got := DiscoveredMetrics([]string{"pods/battle_pressure", "namespaces/battle_pressure", "pods/battle_latency_seconds_p99"})
	if want := []string{"battle_latency_seconds_p99", "battle_pressure"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func terminating(s *State, pod string) {
	for i := range s.Pods {
		if s.Pods[i].Name == pod {
			s.Pods[i].DeletionTimestamp = ptr(metav1.Now())
		}
	}
}

// The drain's states: a gate pod evicted and held, counted out by the PDB;
// its endpoints terminating; and the reasons when they are not.
func TestDrainStates(t *testing.T) {
	s := healthy()
	if r := PDBCountsOut(s, "gate-a", 3); len(r) != 1 || r[0] != "Pod levee/gate-a: not terminating after its eviction" {
		t.Fatalf("not evicted: %q", r)
	}
	terminating(s, "gate-a")
	if r := PDBCountsOut(s, "gate-a", 3); len(r) != 1 || !strings.Contains(r[0], "PodDisruptionBudget levee/gate: 1 disruption(s) allowed, 3 healthy of 3") {
		t.Fatalf("not recounted: %q", r)
	}
	s.PDBs[0].Status.CurrentHealthy, s.PDBs[0].Status.DisruptionsAllowed = 2, 0
	if r := PDBCountsOut(s, "gate-a", 3); len(r) != 0 {
		t.Fatalf("counted out: %q", r)
	}
	if r := GateSteady(s, 3, 1, "hold"); len(r) == 0 {
		t.Fatal("a terminating gate counts as steady")
	}

	if r := EndpointsTerminating(s, "gate-a"); len(r) != 2 || !strings.Contains(r[0], "Service levee/gate: EndpointSlice levee/gate-abc lists the terminating pod levee/gate-a ready true, terminating false") {
		t.Fatalf("endpoints still ready: %q", r)
	}
	for i := range s.Slices {
		s.Slices[i].Endpoints[0] = endpoint("gate-a", "10.244.0.1", false, true)
	}
	if r := EndpointsTerminating(s, "gate-a"); len(r) != 0 {
		t.Fatalf("endpoints terminating: %q", r)
	}
	if got, want := EndpointConditions(s, "gate-a"), "gate: ready false, serving null, terminating true; gate-admin: ready false, serving null, terminating true"; got != want {
		t.Fatalf("EndpointConditions: %q, want %q", got, want)
	}
	s.Slices[1].Endpoints = s.Slices[1].Endpoints[1:]
	if r := EndpointsTerminating(s, "gate-a"); len(r) != 1 || !strings.HasPrefix(r[0], "Service levee/gate-admin: its EndpointSlices list no endpoint for the terminating pod levee/gate-a") {
		t.Fatalf("endpoint gone from gate-admin: %q", r)
	}
	s.Pods = s.Pods[1:]
	if r := EndpointsTerminating(s, "gate-a"); len(r) != 1 || r[0] != "Pod levee/gate-a: gone before its endpoints were seen not ready" {
		t.Fatalf("pod gone: %q", r)
	}
}

func TestGateSteadyHeldAndBudget(t *testing.T) {
	s := healthy()
	s.Pods[1].Finalizers = []string{"hold"}
	s.PDBs[0].Status.DisruptionsAllowed = 3
	r := GateSteady(s, 3, 1, "hold")
	for _, want := range []string{"Pod levee/gate-b: still has the finalizer hold",
		"PodDisruptionBudget levee/gate: 3 disruption(s) allowed (3 healthy of 3, 2 needed), want 1"} {
		if !slices.Contains(r, want) {
			t.Errorf("reasons %q, want %q among them", r, want)
		}
	}
}

func TestPodTargets(t *testing.T) {
	pt := NewPodTargets([]string{"127.0.0.1:1", "127.0.0.1:2"})
	a, b, c := readyPod("battle-a", "battle", "10.0.0.1"), readyPod("battle-b", "battle", "10.0.0.2"), readyPod("battle-c", "battle", "")
	g := pt.Update([]corev1.Pod{a, b, c})
	if len(g) != 2 || g[0].Targets[0] != "127.0.0.1:1" || g[1].Targets[0] != "127.0.0.1:2" || g[1].Labels["__meta_kubernetes_pod_ip"] != "10.0.0.2" {
		t.Fatalf("first update (a pod without IP left out): %+v", g)
	}
	c.Status.PodIP = "10.0.0.3"
	g = pt.Update([]corev1.Pod{b, c}) // a gone: b keeps its process, c gets the next
	if len(g) != 2 || g[0].Targets[0] != "127.0.0.1:2" || g[1].Targets[0] != "127.0.0.1:1" {
		t.Fatalf("second update: %+v", g)
	}
}

func TestRows(t *testing.T) {
	s := healthy()
	u := func(kind, name string, obj map[string]any) *unstructured.Unstructured {
		m := map[string]any{"kind": kind, "apiVersion": "v1", "metadata": map[string]any{"name": name, "namespace": "levee"}}
		for k, v := range obj {
			m[k] = v
		}
		return &unstructured.Unstructured{Object: m}
	}
	rows, err := Rows([]*unstructured.Unstructured{
		u("Deployment", "battle", map[string]any{"apiVersion": "apps/v1", "spec": map[string]any{"replicas": int64(5)}, "status": map[string]any{"readyReplicas": int64(5)}}),
		u("Service", "gate", map[string]any{"spec": map[string]any{"type": "LoadBalancer", "clusterIP": "10.96.0.10"}}),
		u("ConfigMap", "x", nil),
	}, s)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"Deployment", "levee/battle", "5/5 Ready (replicas from HPA battle)"},
		{"Service", "levee/gate", "LoadBalancer 10.96.0.10, 3 ready endpoints in 1 EndpointSlice(s), no external IP (no cloud provider)"},
		{"ConfigMap", "levee/x", "accepted"},
		{"PersistentVolumeClaim", "levee/data-logic-0", "Bound to pv-0 (class standard, 10Gi)"},
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows\n%q\nwant\n%q", rows, want)
	}
}
