package main

import (
	"context"
	"fmt"
	"io"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/ruleset"
)

// schemaNames are the documents `turngate schema` prints: the Rego input of
// each decision package, and the CEL variables turn, step and error
// (onChatError's).
var schemaNames = []string{"tool_call", "tool_result", "turn", "step", "error"}

// schemaParams are the inputs of `turngate schema`.
type schemaParams struct {
	Name string // one of schemaNames
	// Config, if set, is a gateway config whose agents' bodySchema types
	// input.body of tool_call.
	Config string
	// Rules, if set, is a rules directory whose declared state types
	// input.state.
	Rules string
}

// runSchema is `turngate schema [--config FILE] tool_call|tool_result|turn|step|error`:
// print the JSON Schema rules are type-checked against.
func runSchema(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema", "[--config FILE] [--rules DIR] tool_call|tool_result|turn|step|error", stderr)
	var p schemaParams
	fs.StringVar(&p.Config, "config", "", "gateway config `file` whose agents' bodySchema types input.body")
	fs.StringVar(&p.Rules, "rules", "", "rules `directory` whose declared state (state.yaml, *.state.yaml) types input.state")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "turngate schema: want one of %v\n", schemaNames)
		fs.Usage()
		return 2
	}
	p.Name = fs.Arg(0)
	s, err := schema(p)
	if err != nil {
		fmt.Fprintf(stderr, "turngate schema: %v\n", err)
		return 2
	}
	writeJSON(stdout, s)
	return 0
}

// schema returns the JSON Schema p names.
func schema(p schemaParams) (map[string]any, error) {
	switch p.Name {
	case "tool_call", "tool_result":
		opts, err := opaOptions(p.Config)
		if err != nil {
			return nil, err
		}
		if p.Rules != "" {
			st, errs := ruleset.LoadState(p.Rules)
			if errs != nil {
				return nil, errs
			}
			if st.Len() > 0 {
				opts.StateSchema = st.Schema()
			}
		}
		return opa.InputSchema("turngate."+p.Name, opts)
	case "turn", "step", "error":
		return celrules.JSONSchema(p.Name)
	}
	return nil, fmt.Errorf("unknown schema %q (want one of %v)", p.Name, schemaNames)
}

// opaOptions returns the Rego options a gateway running the config at path
// compiles rules with: input.body typed by its agents' bodySchema. An empty
// path means no config: input.body is an open object.
func opaOptions(path string) (opa.Options, error) {
	if path == "" {
		return opa.Options{}, nil
	}
	cfg, err := config.Load(path)
	if err != nil {
		return opa.Options{}, err
	}
	return opa.Options{BodySchema: cfg.BodySchema()}, nil
}
