package main

// Feature files parsed by NFD's local source (source/local) and turned into
// labels by nfd-worker's GetFeatureLabels, exactly as nfd-worker does it.
//
// The local source reads a fixed directory (featureFilesDir, unexported, no
// flag sets it). We point that variable at a private temporary directory that
// holds only the given file, then run the source's real Discover().

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	_ "unsafe" // for go:linkname

	"k8s.io/klog/v2"
	nfdworker "sigs.k8s.io/node-feature-discovery/pkg/nfd-worker"
	"sigs.k8s.io/node-feature-discovery/source"
	_ "sigs.k8s.io/node-feature-discovery/source/local" // registers the "local" source
)

//go:linkname featureFilesDir sigs.k8s.io/node-feature-discovery/source/local.featureFilesDir
var featureFilesDir string

// FeatureFileResult is what nfd-worker takes from the file: the labels it
// would publish and the raw features (local.label, local.feature).
type FeatureFileResult struct {
	Labels   map[string]string            `json:"labels"`
	Features map[string]map[string]string `json:"features"`
}

func featureFileCommand(file string) (*FeatureFileResult, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, inputErrorf("%s: %v", file, err)
	}
	if !st.Mode().IsRegular() {
		return nil, inputErrorf("%s: not a regular file", file)
	}
	dir, err := os.MkdirTemp("", "nfd-oracle-features.d-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// A symlink keeps the file's size and content exactly; the local source
	// stats and reads through it like nfd-worker does through a hostPath mount.
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(file)
	if name == "" || name[0] == '.' {
		name = "features" // the local source skips hidden files; keep the content
	}
	if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
		return nil, err
	}
	featureFilesDir = dir + "/"

	// The local source logs its problems (oversized file, bad directive) with
	// klog; keep them on stderr, away from the JSON.
	klog.SetOutput(os.Stderr)
	local := source.GetFeatureSource("local")
	if local == nil {
		return nil, fmt.Errorf("NFD local source not registered")
	}
	if err := local.Discover(); err != nil {
		return nil, err
	}
	labelSource := source.GetLabelSource("local")
	// nfd-worker's default core.labelWhiteList is the empty regexp (all pass).
	labels, err := nfdworker.GetFeatureLabels(labelSource, *regexp.MustCompile(""))
	if err != nil {
		return nil, err
	}
	res := &FeatureFileResult{Labels: map[string]string{}, Features: map[string]map[string]string{}}
	for k, v := range labels {
		res.Labels[k] = v
	}
	for name, set := range local.GetFeatures().Attributes {
		res.Features["local."+name] = set.Elements
	}
	return res, nil
}
