package deploycheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)

// Object is one decoded document of a rendered kustomization.
type Object struct {
	Obj    runtime.Object
	GVK    schema.GroupVersionKind
	Meta   metav1.Object
	Source string // the kustomization (or file) it was rendered from
	Index  int    // its position among Source's documents, from 0
}

// Ref names the object in error messages: Kind namespace/name (source).
func (o Object) Ref() string {
	ns := o.Meta.GetNamespace()
	if ns == "" {
		ns = "-"
	}
	return fmt.Sprintf("%s %s/%s (%s)", o.GVK.Kind, ns, o.Meta.GetName(), o.Source)
}

// NewScheme is the set of kinds Levee's manifests may use. A kind outside
// it fails to decode.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		appsv1.AddToScheme,
		policyv1.AddToScheme,
		autoscalingv2.AddToScheme,
		networkingv1.AddToScheme,
		rbacv1.AddToScheme,
		monitoringv1.AddToScheme,
		cmv1.AddToScheme,
		addKEDAToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // only on a programming error in the list above
		}
	}
	return s
}

// Decoder decodes documents strictly: an unknown or duplicate field, or a
// kind the scheme lacks, is an error.
type Decoder struct {
	ser *kjson.Serializer
}

// NewDecoder returns a strict decoder for the kinds of NewScheme.
func NewDecoder() *Decoder {
	s := NewScheme()
	return &Decoder{ser: kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s,
		kjson.SerializerOptions{Yaml: true, Strict: true})}
}

// Decode splits a multi-document YAML stream (kustomize's output) and
// decodes every document. It returns the objects that decoded and one error
// per document that did not, each naming the source and the document.
func (d *Decoder) Decode(source string, data []byte) ([]Object, []error) {
	var objs []Object
	var errs []error
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", source, i, err))
			break
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			i--
			continue
		}
		obj, gvk, err := d.ser.Decode(doc, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d (%s): %w", source, i, docName(doc), err))
			continue
		}
		m, err := metaOf(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d (%s): %w", source, i, docName(doc), err))
			continue
		}
		objs = append(objs, Object{Obj: obj, GVK: *gvk, Meta: m, Source: source, Index: i})
	}
	return objs, errs
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// docName is the kind and name of a document that failed to decode, read
// loosely, for the error message.
func docName(doc []byte) string {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := utilyaml.Unmarshal(doc, &head); err != nil || head.Kind == "" {
		return "unreadable kind"
	}
	ns := head.Metadata.Namespace
	if ns == "" {
		ns = "-"
	}
	return head.Kind + " " + ns + "/" + head.Metadata.Name
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
