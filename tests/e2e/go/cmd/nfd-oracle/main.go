// Command nfd-oracle answers questions with Node Feature Discovery's own Go
// code, so that nfd-gpu's Python re-implementation can be checked against it.
//
//	nfd-oracle rules RULES NODEFEATURE   evaluate NodeFeatureRules like nfd-master
//	nfd-oracle batch                     the same for JSON lines on stdin
//	nfd-oracle featurefile FILE          parse a features.d file like nfd-worker
//	nfd-oracle template                  run Go text/template as NFD sets it up, JSON lines
//	nfd-oracle template-funcs            the function names NFD's templates accept
//
// Output is JSON on stdout; a problem with the input is one line on stderr
// and exit status 2. See tests/e2e/README.md.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

const usage = `usage:
  nfd-oracle rules RULES NODEFEATURE   RULES: a NodeFeatureRule file or directory (YAML/JSON)
                                       NODEFEATURE: a NodeFeature object, its spec or spec.features
  nfd-oracle batch                     JSON lines on stdin: {"rules": [docs], "features": doc}
  nfd-oracle featurefile FILE          labels and features nfd-worker takes from a features.d file
  nfd-oracle template                  JSON lines on stdin: {"template": T, "data": D, "map": bool}
  nfd-oracle template-funcs            function names NFD's rule templates accept
`

// inputError is a problem with what the user gave us (exit 2).
type inputError struct{ msg string }

func (e inputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return inputError{fmt.Sprintf(format, args...)}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var (
		out any
		err error
	)
	switch args[0] {
	case "rules":
		if len(args) != 3 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		out, err = rulesCommand(args[1], args[2])
	case "batch", "template":
		if len(args) != 1 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		answer := batchAnswerFor
		if args[0] == "template" {
			answer = templateAnswerFor
		}
		err = jsonLines(stdin, stdout, answer)
		if err == nil {
			return 0
		}
	case "template-funcs":
		if len(args) != 1 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		out = templateFunctions()
	case "featurefile":
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		out, err = featureFileCommand(args[1])
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "nfd-oracle: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "nfd-oracle: %v\n", err)
		if _, ok := err.(inputError); ok {
			return 2
		}
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(stderr, "nfd-oracle: %v\n", err)
		return 1
	}
	return 0
}

func rulesCommand(rulesPath, featuresPath string) (*Result, error) {
	objs, err := loadRulePath(rulesPath)
	if err != nil {
		return nil, err
	}
	feats, err := loadFeaturesFile(featuresPath)
	if err != nil {
		return nil, err
	}
	return evaluate(objs, feats), nil
}

// batchCase is one line of batch input: rule documents as nfd-gpu accepts
// them in one file, and one features document.
type batchCase struct {
	ID       any               `json:"id,omitempty"`
	Rules    []json.RawMessage `json:"rules"`
	Features json.RawMessage   `json:"features"`
}

// batchAnswer is one line of batch output: the result, or the input error.
type batchAnswer struct {
	ID     any     `json:"id,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// batchAnswerFor answers one line of batch input.
func batchAnswerFor(line int, data []byte) any {
	var c batchCase
	var ans batchAnswer
	if err := json.Unmarshal(data, &c); err != nil {
		ans.Error = fmt.Sprintf("line %d: %v", line, err)
		return &ans
	}
	ans.ID = c.ID
	res, err := evaluateDocuments(c.Rules, c.Features, fmt.Sprintf("line %d", line))
	if err != nil {
		ans.Error = err.Error()
	} else {
		ans.Result = res
	}
	return &ans
}

// jsonLines answers each non-empty line of stdin with one JSON line on stdout,
// flushed as soon as it is ready: a caller may keep the process and ask case
// by case.
func jsonLines(stdin io.Reader, stdout io.Writer, answer func(line int, data []byte) any) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := enc.Encode(answer(line, sc.Bytes())); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

func evaluateDocuments(ruleDocs []json.RawMessage, featureDoc json.RawMessage, source string) (*Result, error) {
	objs, err := ruleObjectsFromDocuments(ruleDocs, source, "input")
	if err != nil {
		return nil, err
	}
	feats, err := featuresFromDocument(featureDoc, source)
	if err != nil {
		return nil, err
	}
	return evaluate(objs, feats), nil
}
