// Command kstatus prints the kstatus reading of one Kubernetes object.
//
// It reads a single object as YAML or JSON on stdin and writes one JSON line,
// {"status": "...", "message": "..."}, computed by the kstatus library itself
// (sigs.k8s.io/cli-utils/pkg/kstatus/status), the same code Flux and
// `kubectl wait`-style tooling use. Tests compare Tessera's status stanzas
// against it instead of re-implementing the rules.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

type reading struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
	doc, err := yaml.YAMLToJSON(raw) // JSON is YAML, so both forms pass through
	if err != nil {
		fail("parsing the object: %v", err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(doc); err != nil {
		fail("decoding the object: %v", err)
	}
	result, err := status.Compute(obj)
	if err != nil {
		fail("computing status: %v", err)
	}
	out, _ := json.Marshal(reading{Status: result.Status.String(), Message: result.Message})
	fmt.Println(string(out))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kstatus: "+format+"\n", args...)
	os.Exit(2)
}
