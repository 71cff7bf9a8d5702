// Command kubecheck decodes a stream of Kubernetes manifests (what `helm template` prints) strictly
// against the Kubernetes API types, and prints the decoded objects as one JSON array.
//
// Strict means: every document must be a kind this program knows (core/v1, apps/v1, policy/v1,
// and monitoring.coreos.com/v1 for the ServiceMonitor), and a field the type does not have, a
// field given twice, or a value of the wrong type is an error. Each error names the document,
// its kind and its name; the exit status is then 1. Documents that hold nothing (a template that
// rendered to comments only) are skipped.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// header is what an error message names a document by, read before the strict decode.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func check(in io.Reader, out io.Writer) []error {
	s, err := scheme()
	if err != nil {
		return []error{err}
	}
	decoder := kjson.NewSerializerWithOptions(
		kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Strict: true},
	)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(in))
	var problems []error
	objects := []runtime.Object{}
	for index := 1; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return append(problems, fmt.Errorf("document %d: %w", index, err))
		}
		// YAMLToJSONStrict refuses a key given twice in one mapping.
		data, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			problems = append(problems, fmt.Errorf("document %d: not YAML: %w", index, err))
			continue
		}
		if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
			continue
		}
		var head header
		_ = json.Unmarshal(data, &head)
		where := fmt.Sprintf("document %d (%s %s %q)", index, head.APIVersion, head.Kind, head.Metadata.Name)
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", where, err))
			continue
		}
		objects = append(objects, obj)
	}
	encoded, err := json.MarshalIndent(objects, "", " ")
	if err != nil {
		return append(problems, err)
	}
	if len(problems) == 0 {
		fmt.Fprintln(out, string(encoded))
	}
	return problems
}

func main() {
	problems := check(os.Stdin, os.Stdout)
	for _, problem := range problems {
		fmt.Fprintln(os.Stderr, "kubecheck:", problem)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
