package main

// Evaluation as nfd-master's processNodeFeatureRule does it for one node
// (pkg/nfd-master/nfd-master.go in NFD v0.19.0), with NFD's own rule engine
// (nodefeaturerule.Execute) and validators; only the loop around them is ours.

import (
	"maps"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nfdv1alpha1 "sigs.k8s.io/node-feature-discovery/api/nfd/v1alpha1"
	"sigs.k8s.io/node-feature-discovery/pkg/apis/nfd/nodefeaturerule"
	"sigs.k8s.io/node-feature-discovery/pkg/apis/nfd/validate"
)

// Result has the shape of `nfd-gpu rules test --format json`.
type Result struct {
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
	Taints            []corev1.Taint    `json:"taints"`
	ExtendedResources map[string]string `json:"extendedResources"`
	Vars              map[string]string `json:"vars"`
	Errors            []RuleError       `json:"errors"`
}

// RuleError is one rule that failed, or one output item nfd-master rejects.
type RuleError struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// withNamespace adds ns to keys without one; a key given both ways keeps the
// prefixed value (nfd-master's addNsToMapKeys). Also returns, for each output
// key, the key it came from.
func withNamespace(in map[string]string, ns string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if strings.Contains(k, "/") {
			out[k] = v
			continue
		}
		full := path.Join(ns, k)
		if _, both := in[full]; !both {
			out[full] = v
		}
	}
	return out
}

// dynamicValue resolves `@domain.feature.element` from an attribute feature.
func dynamicValue(value string, features *nfdv1alpha1.Features) (string, string) {
	split := strings.SplitN(value[1:], ".", 3)
	if len(split) != 3 {
		return "", "value " + value + " is not in the form of '@domain.feature.element'"
	}
	name := split[0] + "." + split[1]
	set, ok := features.Attributes[name]
	if !ok {
		return "", "feature " + name + " not found"
	}
	v, ok := set.Elements[split[2]]
	if !ok {
		return "", "element " + split[2] + " not found on feature " + name
	}
	return v, ""
}

func evaluate(objs []ruleObject, features *nfdv1alpha1.Features) *Result {
	res := &Result{
		Labels:            map[string]string{},
		Annotations:       map[string]string{},
		Taints:            []corev1.Taint{},
		ExtendedResources: map[string]string{},
		Vars:              map[string]string{},
		Errors:            []RuleError{},
	}
	labels := map[string]string{}
	annotations := map[string]string{}
	ers := map[string]string{}
	// Which rule set each output key last, for error messages.
	labelRule := map[string]string{}
	annRule := map[string]string{}
	erRule := map[string]string{}
	type ruleTaint struct {
		rule  string
		taint corev1.Taint
	}
	var taints []ruleTaint

	sorted := slicesClone(objs)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, obj := range sorted {
		for _, rule := range obj.Rules {
			out, err := nodefeaturerule.Execute(&rule, features, true)
			if err != nil {
				res.Errors = append(res.Errors, RuleError{rule.Name, err.Error()})
				continue
			}
			for _, t := range out.Taints {
				taints = append(taints, ruleTaint{rule.Name, t})
			}
			l := withNamespace(out.Labels, nfdv1alpha1.FeatureLabelNs)
			e := withNamespace(out.ExtendedResources, nfdv1alpha1.ExtendedResourceNs)
			a := withNamespace(out.Annotations, nfdv1alpha1.FeatureAnnotationNs)
			maps.Copy(labels, l)
			maps.Copy(ers, e)
			maps.Copy(annotations, a)
			for k := range l {
				labelRule[k] = rule.Name
			}
			for k := range e {
				erRule[k] = rule.Name
			}
			for k := range a {
				annRule[k] = rule.Name
			}
			maps.Copy(res.Vars, out.Vars)
			// Feed the rule's output back for later rules (rule.matched).
			features.InsertAttributeFeatures(nfdv1alpha1.RuleBackrefDomain, nfdv1alpha1.RuleBackrefFeature, out.Labels)
			features.InsertAttributeFeatures(nfdv1alpha1.RuleBackrefDomain, nfdv1alpha1.RuleBackrefFeature, out.Vars)
		}
	}

	// nfd-master's filtering with its default configuration (no extra or
	// denied label namespaces, no whitelist, auto-prefix on).
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		if strings.HasPrefix(v, "@") {
			dv, problem := dynamicValue(v, features)
			if problem != "" {
				res.Errors = append(res.Errors, RuleError{labelRule[k], "ignoring label " + k + "=" + v + ": " + problem})
				continue
			}
			v = dv
		}
		if err := validate.Label(k, v); err != nil {
			res.Errors = append(res.Errors, RuleError{labelRule[k], "ignoring label " + k + "=" + v + ": " + err.Error()})
			continue
		}
		res.Labels[k] = v
	}
	for _, k := range sortedKeys(annotations) {
		v := annotations[k]
		if err := validate.Annotation(k, v); err != nil {
			res.Errors = append(res.Errors, RuleError{annRule[k], "ignoring annotation " + k + ": " + err.Error()})
			continue
		}
		res.Annotations[k] = v
	}
	for _, k := range sortedKeys(ers) {
		v := ers[k]
		if strings.HasPrefix(v, "@") {
			dv, problem := dynamicValue(v, features)
			if problem != "" {
				res.Errors = append(res.Errors, RuleError{erRule[k], "ignoring extended resource " + k + ": " + problem})
				continue
			}
			v = dv
		}
		if err := validate.ExtendedResource(k, v); err != nil {
			res.Errors = append(res.Errors, RuleError{erRule[k], "ignoring extended resource " + k + ": " + err.Error()})
			continue
		}
		res.ExtendedResources[k] = v
	}
	for _, t := range taints {
		if err := validate.Taint(&t.taint); err != nil {
			res.Errors = append(res.Errors, RuleError{t.rule, "ignoring taint " + t.taint.Key + ": " + err.Error()})
			continue
		}
		res.Taints = append(res.Taints, t.taint)
	}
	return res
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
