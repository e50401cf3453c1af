// Command dra-cel evaluates DRA device selectors with Kubernetes' own compiler
// (k8s.io/dynamic-resource-allocation/cel, the scheduler's), for nfd-gpu's tests.
//
// Input (stdin, JSON): a list of cases, each {"driver": "gpu.nvidia.com",
// "devices": [resource.k8s.io/v1 Device, ...], "expressions": ["cel", ...]}.
// Output (stdout, JSON): per case, per expression, {"error": "..."} when it does not
// compile or fails on a device, else {"matches": [device names]}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

type input struct {
	Driver      string               `json:"driver"`
	Devices     []resourceapi.Device `json:"devices"`
	Expressions []string             `json:"expressions"`
}

type result struct {
	Error   string   `json:"error,omitempty"`
	Matches []string `json:"matches"`
}

func evaluate(compiler interface {
	CompileCELExpression(string, cel.Options) cel.CompilationResult
}, c input) []result {
	out := make([]result, 0, len(c.Expressions))
	for _, expr := range c.Expressions {
		compiled := compiler.CompileCELExpression(expr, cel.Options{})
		if compiled.Error != nil {
			out = append(out, result{Error: compiled.Error.Error(), Matches: []string{}})
			continue
		}
		r := result{Matches: []string{}}
		for _, d := range c.Devices {
			ok, _, err := compiled.DeviceMatches(context.Background(), cel.Device{
				Driver: c.Driver, Attributes: d.Attributes, Capacity: d.Capacity,
			})
			if err != nil {
				r.Error = fmt.Sprintf("device %s: %v", d.Name, err)
				break
			}
			if ok {
				r.Matches = append(r.Matches, d.Name)
			}
		}
		out = append(out, r)
	}
	return out
}

func main() {
	var cases []input
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintf(os.Stderr, "dra-cel: stdin: %v\n", err)
		os.Exit(2)
	}
	compiler := cel.GetCompiler(cel.Features{})
	results := make([][]result, 0, len(cases))
	for _, c := range cases {
		results = append(results, evaluate(compiler, c))
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "dra-cel: stdout: %v\n", err)
		os.Exit(1)
	}
}
