package deploycheck

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KEDA's ScaledObject, mirrored from github.com/kedacore/keda/v2
// apis/keda/v1alpha1 (v2.21.0) for the fields a manifest may set. Importing
// KEDA's own package would pull in client-go and controller-runtime (about
// 620 packages against about 90 for everything else here), so this strict
// mirror stands in for it: a field KEDA does not know is an error here too.
// Status is left out on purpose: manifests never carry it.

// KEDAGroupVersion is the API group and version of ScaledObject.
var KEDAGroupVersion = schema.GroupVersion{Group: "keda.sh", Version: "v1alpha1"}

// ScaledObject is keda.sh/v1alpha1 ScaledObject.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is the spec of a ScaledObject.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

// ScaleTarget names the workload a ScaledObject scales.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// AdvancedConfig is spec.advanced.
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *HorizontalPodAutoscalerConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool                           `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              *ScalingModifiers              `json:"scalingModifiers,omitempty"`
}

// HorizontalPodAutoscalerConfig is what KEDA passes on to the HPA it makes.
type HorizontalPodAutoscalerConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	Name     string                                         `json:"name,omitempty"`
}

// ScalingModifiers combines triggers with a formula.
type ScalingModifiers struct {
	Formula          string                         `json:"formula,omitempty"`
	Target           string                         `json:"target,omitempty"`
	ActivationTarget string                         `json:"activationTarget,omitempty"`
	MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// Fallback is the replica count KEDA falls back to when triggers fail.
type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// ScaleTriggers is one trigger (for Levee: type prometheus).
type ScaleTriggers struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// AuthenticationRef names a TriggerAuthentication.
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// DeepCopyObject implements runtime.Object, copying through the
// unstructured form rather than a hand-written deep copy.
func (s *ScaledObject) DeepCopyObject() runtime.Object {
	if s == nil {
		return nil
	}
	out := new(ScaledObject)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustUnstructured(s), out); err != nil {
		panic(err) // a ScaledObject always round-trips through its own JSON form
	}
	return out
}

func mustUnstructured(obj any) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return u
}

func addKEDAToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(KEDAGroupVersion, &ScaledObject{})
	metav1.AddToGroupVersion(s, KEDAGroupVersion)
	return nil
}
