// The CUDA recording (a fixture's cuda.json, the format of
// nfd_gpu/discovery/nvidia/cuda.py) handed to the fake libcuda.so.1
// (tests/e2e/gfd/fakecuda/fakecuda.c) that GFD's tegra strategy loads: each
// recorded call becomes one line of FAKE_CUDA_ANSWERS, "<call> <CUresult>
// [<device> [<attribute>]] [<value>]". {"error": N} in place of a value is
// CUresult N. The library reads the variable when GFD calls it (os.Setenv sets
// the C environment in a cgo program).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// cudaAnswer is one recorded answer: its CUresult and value text.
func cudaAnswer(raw json.RawMessage) (int, string, error) {
	var e struct {
		Error *int `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != nil {
		return *e.Error, "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return 0, s, nil
	}
	var n json.Number
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return 0, "", fmt.Errorf("unexpected answer %s", raw)
	}
	return 0, n.String(), nil
}

func cudaLine(call, keys string, raw json.RawMessage) (string, error) {
	code, value, err := cudaAnswer(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", call, err)
	}
	return strings.TrimSpace(fmt.Sprintf("%s %d %s %s", call, code, keys, value)), nil
}

// cudaAnswers turns a CUDA recording into the fake library's FAKE_CUDA_ANSWERS.
func cudaAnswers(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var rec struct {
		Init    json.RawMessage              `json:"cuInit"`
		Version json.RawMessage              `json:"cuDriverGetVersion"`
		Devices []map[string]json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	lines := []string{fmt.Sprintf("cuDeviceGetCount 0 %d", len(rec.Devices))}
	for call, raw := range map[string]json.RawMessage{"cuInit": rec.Init, "cuDriverGetVersion": rec.Version} {
		if raw == nil {
			continue
		}
		line, err := cudaLine(call, "", raw)
		if err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	for i, dev := range rec.Devices {
		for call, raw := range dev {
			if call != "cuDeviceGetAttribute" {
				line, err := cudaLine(call, strconv.Itoa(i), raw)
				if err != nil {
					return "", err
				}
				lines = append(lines, line)
				continue
			}
			var attrs map[string]json.RawMessage
			if err := json.Unmarshal(raw, &attrs); err != nil {
				return "", fmt.Errorf("%s: cuDeviceGetAttribute: %w", path, err)
			}
			for attr, v := range attrs {
				line, err := cudaLine(call, strconv.Itoa(i)+" "+attr, v)
				if err != nil {
					return "", err
				}
				lines = append(lines, line)
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}
