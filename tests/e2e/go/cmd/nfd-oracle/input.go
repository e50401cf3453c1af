package main

// Reading rule and feature files the way `nfd-gpu rules test` accepts them:
// YAML or JSON, several documents per file, NodeFeatureRule objects, a
// `kind: List` of them, or a bare `{rules: [...]}` mapping named after the
// file; a directory means its *.yaml, *.yml and *.json files in name order.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	nfdv1alpha1 "sigs.k8s.io/node-feature-discovery/api/nfd/v1alpha1"
	"sigs.k8s.io/yaml"
)

const ruleAPIVersion = "nfd.k8s-sigs.io/v1alpha1"

// ruleObject is one NodeFeatureRule: its name (nfd-master orders by it) and rules.
type ruleObject struct {
	Name  string
	Rules []nfdv1alpha1.Rule
}

// A whole line that is only a Helm template action, e.g. `{{- if .Values.x }}`.
var helmLine = regexp.MustCompile(`^\{\{-?.*-?\}\}\s*$`)

func loadRulePath(path string) ([]ruleObject, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, inputErrorf("%s: %v", path, errors.Unwrap(err))
	}
	files := []string{path}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, inputErrorf("%s: cannot read directory: %v", path, err)
		}
		files = nil
		for _, e := range entries {
			name := e.Name()
			ext := filepath.Ext(name)
			if e.Type().IsRegular() && !strings.HasPrefix(name, ".") && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				files = append(files, filepath.Join(path, name))
			}
		}
		slices.Sort(files)
	}
	var objs []ruleObject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, inputErrorf("%s: cannot read: %v", f, err)
		}
		docs, err := splitDocuments(data)
		if err != nil {
			stripped := stripHelm(data)
			if bytes.Equal(stripped, data) {
				return nil, inputErrorf("%s: cannot parse YAML: %v", f, err)
			}
			if docs, err = splitDocuments(stripped); err != nil {
				return nil, inputErrorf("%s: cannot parse YAML: %v", f, err)
			}
		}
		stem := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		more, err := ruleObjectsFromDocuments(docs, f, stem)
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}
	return objs, nil
}

func stripHelm(data []byte) []byte {
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		if helmLine.Match(l) {
			lines[i] = nil
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// splitDocuments turns a YAML or JSON stream into one JSON value per document.
func splitDocuments(data []byte) ([]json.RawMessage, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []json.RawMessage
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		docs = append(docs, j)
	}
}

// strictUnmarshal rejects unknown fields, as nfd-gpu's loader (and the API
// server's strict field validation) does.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func ruleObjectsFromDocuments(docs []json.RawMessage, source, stem string) ([]ruleObject, error) {
	var objs []ruleObject
	for n, raw := range docs {
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 || string(trimmed) == "null" {
			continue
		}
		var head map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &head); err != nil {
			return nil, inputErrorf("%s: document %d: not a NodeFeatureRule object or rules list", source, n+1)
		}
		var kind, api string
		_ = json.Unmarshal(head["kind"], &kind)
		_ = json.Unmarshal(head["apiVersion"], &api)
		_, hasKind := head["kind"]
		_, hasAPI := head["apiVersion"]
		switch {
		case kind == "List":
			var items []json.RawMessage
			if err := json.Unmarshal(head["items"], &items); err != nil {
				return nil, inputErrorf("%s: document %d: items: %v", source, n+1, err)
			}
			more, err := ruleObjectsFromDocuments(items, source, stem)
			if err != nil {
				return nil, err
			}
			objs = append(objs, more...)
		case !hasKind && !hasAPI:
			// A bare {rules: [...]} mapping; the object is named after the file.
			var spec nfdv1alpha1.NodeFeatureRuleSpec
			if _, ok := head["rules"]; !ok {
				return nil, inputErrorf("%s: document %d: missing 'rules' (or apiVersion/kind)", source, n+1)
			}
			if err := strictUnmarshal(trimmed, &spec); err != nil {
				return nil, inputErrorf("%s: document %d: %v", source, n+1, err)
			}
			objs = append(objs, ruleObject{Name: stem, Rules: spec.Rules})
		case kind != "NodeFeatureRule":
			fmt.Fprintf(os.Stderr, "warning: %s: document %d: skipping kind %q (not NodeFeatureRule)\n", source, n+1, kind)
		default:
			if api != ruleAPIVersion {
				return nil, inputErrorf("%s: document %d: apiVersion: %q is not %q", source, n+1, api, ruleAPIVersion)
			}
			var obj nfdv1alpha1.NodeFeatureRule
			if err := strictUnmarshal(trimmed, &obj); err != nil {
				return nil, inputErrorf("%s: document %d: %v", source, n+1, err)
			}
			if obj.Name == "" {
				return nil, inputErrorf("%s: document %d: metadata.name: missing", source, n+1)
			}
			if _, ok := head["spec"]; !ok || obj.Spec.Rules == nil {
				return nil, inputErrorf("%s: %s: spec.rules: missing", source, obj.Name)
			}
			objs = append(objs, ruleObject{Name: obj.Name, Rules: obj.Spec.Rules})
		}
	}
	return objs, nil
}

func loadFeaturesFile(path string) (*nfdv1alpha1.Features, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputErrorf("%s: cannot read: %v", path, errors.Unwrap(err))
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, inputErrorf("%s: cannot parse YAML/JSON: %v", path, err)
	}
	var nonNull []json.RawMessage
	for _, d := range docs {
		if t := bytes.TrimSpace(d); len(t) > 0 && string(t) != "null" {
			nonNull = append(nonNull, d)
		}
	}
	if len(nonNull) != 1 {
		return nil, inputErrorf("%s: expected one NodeFeature document, found %d", path, len(nonNull))
	}
	return featuresFromDocument(nonNull[0], path)
}

// featuresFromDocument accepts a NodeFeature object, its spec, or its spec.features.
func featuresFromDocument(raw json.RawMessage, source string) (*nfdv1alpha1.Features, error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil || head == nil {
		return nil, inputErrorf("%s: not a NodeFeature object or features map", source)
	}
	featuresRaw := raw
	_, hasSpec := head["spec"]
	var kind string
	_ = json.Unmarshal(head["kind"], &kind)
	_, hasFlags := head["flags"]
	_, hasAttrs := head["attributes"]
	_, hasInsts := head["instances"]
	switch {
	case kind == "NodeFeature" || hasSpec:
		var spec map[string]json.RawMessage
		if err := json.Unmarshal(head["spec"], &spec); err != nil || spec == nil {
			return nil, inputErrorf("%s: spec: missing or not a map", source)
		}
		featuresRaw = spec["features"]
	case head["features"] != nil && !hasFlags && !hasAttrs && !hasInsts:
		featuresRaw = head["features"]
	}
	feats := nfdv1alpha1.NewFeatures()
	if len(featuresRaw) == 0 || string(bytes.TrimSpace(featuresRaw)) == "null" {
		return feats, nil
	}
	if err := strictUnmarshal(featuresRaw, feats); err != nil {
		return nil, inputErrorf("%s: features: %v", source, err)
	}
	// nil maps (e.g. `flags: null`) become empty ones, as after a round trip
	// through the API server.
	if feats.Flags == nil {
		feats.Flags = map[string]nfdv1alpha1.FlagFeatureSet{}
	}
	if feats.Attributes == nil {
		feats.Attributes = map[string]nfdv1alpha1.AttributeFeatureSet{}
	}
	if feats.Instances == nil {
		feats.Instances = map[string]nfdv1alpha1.InstanceFeatureSet{}
	}
	for name, set := range feats.Attributes {
		if set.Elements == nil {
			feats.Attributes[name] = nfdv1alpha1.NewAttributeFeatures(nil)
		}
	}
	return feats, nil
}
