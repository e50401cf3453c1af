package main

// `nfd-oracle template`: Go's own text/template, set up as NFD v0.19.0's
// pkg/apis/nfd/template.NewHelper sets it up (Sprig's TxtFuncMap without env,
// expandenv and getHostByName; missingkey=error), on the rows of nfd-gpu's
// conformance table (tests/data/template/). NFD's Helper keeps its
// *template.Template unexported, so the text output comes from a template
// built the same way here. Whether a row parses is NFD's NewHelper's answer
// (its size limit included), `map` rows run NFD's own Helper.ExpandMap, and
// `nfd-oracle template-funcs` lists the function names NFD's Helper accepts,
// probing it name by name.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	nfdtemplate "sigs.k8s.io/node-feature-discovery/pkg/apis/nfd/template"
)

// templateCase is one line of `nfd-oracle template` input.
type templateCase struct {
	ID       any             `json:"id,omitempty"`
	Template string          `json:"template"`
	Data     json.RawMessage `json:"data"`
	Map      bool            `json:"map,omitempty"` // run NFD's Helper.ExpandMap
}

// templateAnswer is one line of output: the text (or map), or the stage that
// failed ("parse", "exec", "expand"; "input" for a bad line, "oracle" if the
// oracle's template and NFD's disagree on parsing) and Go's message.
type templateAnswer struct {
	ID     any               `json:"id,omitempty"`
	Output *string           `json:"output,omitempty"`
	Map    map[string]string `json:"map,omitempty"`
	Stage  string            `json:"stage,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// nfdHostFunctions are the Sprig functions NFD's funcMap deletes.
var nfdHostFunctions = []string{"env", "expandenv", "getHostByName"}

func goTemplate(src string) (*template.Template, error) {
	funcs := sprig.TxtFuncMap()
	for _, name := range nfdHostFunctions {
		delete(funcs, name)
	}
	return template.New("").Funcs(funcs).Option("missingkey=error").Parse(src)
}

// templateData decodes a row's data: JSON integers become int and other
// numbers float64 (as YAML gives them to nfd-gpu), and a mapping whose values
// are all strings becomes a map[string]string, the type of NFD's matched
// feature elements (what `index` of a missing key returns depends on it).
func templateData(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return goValue(v), nil
}

func goValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = goValue(x[i])
		}
		return x
	case map[string]any:
		strs := make(map[string]string, len(x))
		for k, e := range x {
			x[k] = goValue(e)
			if s, ok := x[k].(string); ok {
				strs[k] = s
			}
		}
		if len(strs) == len(x) {
			return strs
		}
		return x
	}
	return v
}

func runTemplateCase(c templateCase) templateAnswer {
	ans := templateAnswer{ID: c.ID}
	data, err := templateData(c.Data)
	if err != nil {
		ans.Stage, ans.Error = "input", err.Error()
		return ans
	}
	// Whether the template parses is NFD's own answer.
	h, err := nfdtemplate.NewHelper(c.Template)
	if err != nil {
		ans.Stage, ans.Error = "parse", err.Error()
		return ans
	}
	tmpl, err := goTemplate(c.Template)
	if err != nil {
		ans.Stage, ans.Error = "oracle", "NFD's Helper parses it, the oracle's template does not: "+err.Error()
		return ans
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		ans.Stage, ans.Error = "exec", err.Error()
		return ans
	}
	if !c.Map {
		text := out.String()
		ans.Output = &text
		return ans
	}
	m, err := h.ExpandMap(data)
	if err != nil {
		ans.Stage, ans.Error = "expand", err.Error()
		return ans
	}
	ans.Map = m
	return ans
}

// templateAnswerFor answers one line of `nfd-oracle template` input.
func templateAnswerFor(line int, data []byte) any {
	var c templateCase
	if err := json.Unmarshal(data, &c); err != nil {
		return templateAnswer{Stage: "input", Error: fmt.Sprintf("line %d: %v", line, err)}
	}
	return runTemplateCase(c)
}

// templateFunctions lists the function names NFD's Helper accepts: Sprig's,
// text/template's built-ins and the three NFD deletes, each kept when
// NewHelper parses a template that names it.
func templateFunctions() []string {
	builtins := []string{
		"and", "call", "html", "index", "slice", "js", "len", "not", "or", "print",
		"printf", "println", "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
	}
	candidates := append(builtins, nfdHostFunctions...)
	for name := range sprig.TxtFuncMap() {
		candidates = append(candidates, name)
	}
	var names []string
	for _, name := range candidates {
		if _, err := nfdtemplate.NewHelper("{{if false}}{{" + name + "}}{{end}}"); err == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
