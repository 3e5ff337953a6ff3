// promql-check parses PromQL expressions with the parser of the Prometheus
// version the lab runs (go.mod pins the matching github.com/prometheus/prometheus
// module) and reports every expression that does not parse.
//
//	promql-check [-enable-feature=NAME,...] [FILE.json ...] < exprs.json
//
// Input (stdin when no file is given): a JSON array of {"name": ..., "expr": ...}
// objects, or of bare expression strings. Output: one FAIL line per expression
// that fails, with the parser's error, then a summary line. Exit status: 0 when
// every expression parses, 1 when one does not, 2 on bad usage or input.
//
// -enable-feature takes Prometheus's own --enable-feature names; the ones that
// change the parser (promql-experimental-functions, promql-duration-expr,
// promql-extended-range-selectors, promql-binop-fill-modifiers) are honoured,
// any other is ignored, so the server's flags can be passed as they are.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

type expression struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

func (e *expression) UnmarshalJSON(data []byte) error {
	var bare string
	if err := json.Unmarshal(data, &bare); err == nil {
		e.Expr = bare
		return nil
	}
	type plain expression
	var p plain
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*e = expression(p)
	return nil
}

type features []string

func (f *features) String() string { return strings.Join(*f, ",") }
func (f *features) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*f = append(*f, name)
		}
	}
	return nil
}

func options(enabled features) parser.Options {
	var opts parser.Options
	for _, name := range enabled {
		switch name {
		case "promql-experimental-functions":
			opts.EnableExperimentalFunctions = true
		case "promql-duration-expr":
			opts.ExperimentalDurationExpr = true
		case "promql-extended-range-selectors":
			opts.EnableExtendedRangeSelectors = true
		case "promql-binop-fill-modifiers":
			opts.EnableBinopFillModifiers = true
		}
	}
	return opts
}

func read(name string, r io.Reader) ([]expression, error) {
	var exprs []expression
	dec := json.NewDecoder(r)
	if err := dec.Decode(&exprs); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i := range exprs {
		if exprs[i].Name == "" {
			exprs[i].Name = fmt.Sprintf("%s[%d]", name, i)
		}
	}
	return exprs, nil
}

func main() {
	var enabled features
	flag.Var(&enabled, "enable-feature", "a Prometheus --enable-feature value (comma-separated, repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-enable-feature=NAME,...] [FILE.json ...] (default: stdin)\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()

	var exprs []expression
	if flag.NArg() == 0 {
		got, err := read("stdin", os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "promql-check:", err)
			os.Exit(2)
		}
		exprs = got
	}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "promql-check:", err)
			os.Exit(2)
		}
		got, err := read(path, f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "promql-check:", err)
			os.Exit(2)
		}
		exprs = append(exprs, got...)
	}

	p := parser.NewParser(options(enabled))
	failed := 0
	for _, e := range exprs {
		if _, err := p.ParseExpr(e.Expr); err != nil {
			failed++
			fmt.Printf("FAIL %s: %v\n    expr: %s\n", e.Name, err, strings.ReplaceAll(e.Expr, "\n", "\n          "))
		}
	}
	fmt.Printf("promql-check: %d expressions, %d failed\n", len(exprs), failed)
	if failed > 0 {
		os.Exit(1)
	}
}
