package opa

import (
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
)

// schemaFiles holds the JSON Schemas of the decision packages' input
// documents: exactly what input.go builds (TestInputSchemasDescribeInputs
// validates built documents against them).
//
//go:embed schemas/*.json
var schemaFiles embed.FS

// Schema paths in the compiler's schema set, as Rego annotations name them
// (schema.input.tool_call is the ref schema["input"]["tool_call"]).
var (
	toolCallSchemaRef   = ast.MustParseRef("schema.input.tool_call")
	toolResultSchemaRef = ast.MustParseRef("schema.input.tool_result")
	// dataSchemaRef prefixes the schemas of data's top-level keys.
	dataSchemaRef = ast.MustParseRef("schema.data")
)

// InputSchema returns the JSON Schema of the input document of the
// decision package pkg (ToolCallPackage or ToolResultPackage), with
// input.body typed by opts.BodySchema when it is set. It is what every
// module of that package is type-checked against, and what `turngate schema`
// prints. The caller owns the result.
func InputSchema(pkg string, opts Options) (map[string]any, error) {
	schemas, err := inputSchemas()
	if err != nil {
		return nil, err
	}
	base, ok := schemas[pkg]
	if !ok {
		return nil, fmt.Errorf("no input schema for package %q (want %s or %s)", pkg, ToolCallPackage, ToolResultPackage)
	}
	s := cloneJSON(base).(map[string]any)
	props, _ := s["properties"].(map[string]any)
	if opts.BodySchema != nil && props["body"] != nil {
		props["body"] = opts.BodySchema
	}
	if props != nil {
		props["state"] = stateSchema(opts.StateSchema)
	}
	return s, nil
}

// stateSchema is the schema of input.state: the declared one, or a closed
// object without keys when no state is declared.
func stateSchema(declared map[string]any) any {
	if declared != nil {
		return cloneJSON(declared)
	}
	return map[string]any{
		"type":                 "object",
		"description":          "the declared state the rules read; this rule set declares none (state.yaml, *.state.yaml)",
		"additionalProperties": false,
		"properties":           map[string]any{},
	}
}

// inputSchemas decodes the embedded schemas once, by package, each
// standing alone (inlineRefs).
var inputSchemas = sync.OnceValues(func() (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for pkg, name := range map[string]string{ToolCallPackage: "tool_call", ToolResultPackage: "tool_result"} {
		s, err := readSchema(name)
		if err == nil {
			err = inlineRefs(s)
		}
		if err != nil {
			return nil, err
		}
		out[pkg] = s
	}
	return out, nil
})

// cloneJSON deep-copies a decoded JSON value.
func cloneJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = cloneJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = cloneJSON(x)
		}
		return out
	}
	return v
}

// readSchema decodes the embedded schemas/<name>.json.
func readSchema(name string) (map[string]any, error) {
	data, err := schemaFiles.ReadFile("schemas/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("reading schema %s: %w", name, err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decoding schema %s: %w", name, err)
	}
	return s, nil
}

// inlineRefs replaces each property {"$ref": "<file>.json#/properties/<p>"}
// of s with that property of the other embedded schema, so a printed or
// compiled schema stands alone while the files state shared fields once.
func inlineRefs(s map[string]any) error {
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		ref, _ := p.(map[string]any)["$ref"].(string)
		if ref == "" {
			continue
		}
		file, prop, ok := strings.Cut(ref, ".json#/properties/")
		if !ok {
			return fmt.Errorf("schema property %s: unsupported $ref %q", name, ref)
		}
		other, err := readSchema(file)
		if err != nil {
			return err
		}
		v, ok := other["properties"].(map[string]any)[prop]
		if !ok {
			return fmt.Errorf("schema property %s: $ref %q names no property", name, ref)
		}
		props[name] = v
	}
	return nil
}

// valueSchema derives the JSON Schema of one JSON value: the type of
// scalars, closed objects and arrays whose items merge their elements'
// schemas.
func valueSchema(v any) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		props := make(map[string]any, len(v))
		for k, x := range v {
			props[k] = valueSchema(x)
		}
		return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	case []any:
		s := map[string]any{"type": "array"}
		if len(v) > 0 {
			items := valueSchema(v[0])
			for _, x := range v[1:] {
				items = mergeSchemas(items, valueSchema(x))
			}
			s["items"] = items
		}
		return s
	case string:
		return map[string]any{"type": "string"}
	case bool:
		return map[string]any{"type": "boolean"}
	case nil:
		return map[string]any{"type": "null"}
	}
	return map[string]any{"type": "number"} // json.Number, float64
}

// mergeSchemas is the schema of values of either derived schema: objects
// merge their properties, equal types stay, anything else is any.
func mergeSchemas(a, b map[string]any) map[string]any {
	if a["type"] != b["type"] {
		return map[string]any{}
	}
	ap, aok := a["properties"].(map[string]any)
	bp, bok := b["properties"].(map[string]any)
	if !aok || !bok {
		if a["type"] == "array" {
			ai, _ := a["items"].(map[string]any)
			bi, _ := b["items"].(map[string]any)
			switch {
			case ai == nil:
				return b
			case bi != nil:
				return map[string]any{"type": "array", "items": mergeSchemas(ai, bi)}
			}
		}
		return a
	}
	props := maps.Clone(ap)
	for k, v := range bp {
		if x, ok := props[k]; ok {
			props[k] = mergeSchemas(x.(map[string]any), v.(map[string]any))
		} else {
			props[k] = v
		}
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// typeSchemas prepares the type checking of one compilation: it returns
// the compiler's schema set (the two input schemas and one schema per
// top-level key of the data document doc, derived from the data files) and
// annotates every rule of the policy modules with the schemas it is checked
// against (annotateSchemas). A reference to a top-level data key that
// neither a data file nor a package defines is reported here; OPA's type
// checker reports every other reference to a field or data path that does
// not exist.
func (b *build) typeSchemas(doc map[string]any, modules map[string]*ast.Module) *ast.SchemaSet {
	ss := ast.NewSchemaSet()
	for _, x := range []struct {
		pkg string
		ref ast.Ref
	}{{ToolCallPackage, toolCallSchemaRef}, {ToolResultPackage, toolResultSchemaRef}} {
		s, err := InputSchema(x.pkg, b.opts)
		if err != nil {
			b.errs = append(b.errs, &policy.Error{Code: policy.CodeType, Message: err.Error()})
			return nil
		}
		ss.Put(x.ref, s)
	}
	// Packages are open: rules are typed by the checker itself.
	roots := map[string]bool{}
	for _, m := range modules {
		if len(m.Package.Path) > 1 {
			if s, ok := m.Package.Path[1].Value.(ast.String); ok {
				roots[string(s)] = true
			}
		}
	}
	typed := map[string]bool{}
	for k, v := range doc {
		if !roots[k] {
			ss.Put(dataSchemaRef.Append(ast.StringTerm(k)), valueSchema(v))
			typed[k] = true
		}
	}
	var pkgs []ast.Ref
	for _, m := range modules {
		pkgs = append(pkgs, m.Package.Path)
	}
	for _, m := range b.typed {
		b.checkDataRoots(m, doc, roots, pkgs)
		annotateSchemas(m, typed)
	}
	return ss
}

// checkDataRoots reports each reference data.<key> in m whose key no data
// file and no package defines, and each reference under a key only
// packages define that leads into none of them (data.turngate.libb
// beside package turngate.lib: an import with a typo, whose rules would
// be undefined and never fire).
func (b *build) checkDataRoots(m *ast.Module, doc map[string]any, roots map[string]bool, pkgs []ast.Ref) {
	ast.WalkRefs(m, func(ref ast.Ref) bool {
		if len(ref) < 2 || !ref[0].Equal(ast.DefaultRootDocument) {
			return false
		}
		key, ok := ref[1].Value.(ast.String)
		if !ok {
			return false
		}
		if _, inData := doc[string(key)]; inData {
			return false
		}
		if roots[string(key)] {
			if err := b.outsidePackages(ref, pkgs); err != nil {
				b.errs = append(b.errs, err)
			}
			return false
		}
		candidates := make([]ast.Value, 0, len(doc)+len(roots))
		for k := range doc {
			candidates = append(candidates, ast.String(k))
		}
		for k := range roots {
			candidates = append(candidates, ast.String(k))
		}
		loc := ref[1].Location
		if loc == nil {
			loc = ref[0].Location
		}
		b.errs = append(b.errs, b.src.error(policy.CodeType, loc, fmt.Sprintf("undefined ref %v: data has no key %v", ref, ref[1])+keyHint(ref[:1], ref[1], candidates)))
		return false
	})
}

// outsidePackages returns the error of a reference whose constant prefix
// leads outside every package of pkgs — no package's path is a prefix of
// it, and it is a prefix of none — naming the packages there and the one
// meant; nil for a reference into (or above) a package.
func (b *build) outsidePackages(ref ast.Ref, pkgs []ast.Ref) *policy.Error {
	prefix := ref.ConstantPrefix()
	depth := 0 // how far prefix follows some package's path
	for _, p := range pkgs {
		if prefix.HasPrefix(p) || p.HasPrefix(prefix) {
			return nil
		}
		n := 0
		for n < len(p) && n < len(prefix) && p[n].Equal(prefix[n]) {
			n++
		}
		depth = max(depth, n)
	}
	var there []string // the paths one step below where prefix leaves the packages
	for _, p := range pkgs {
		if len(p) > depth && p[:depth].Equal(prefix[:depth]) {
			there = append(there, p[:depth+1].String())
		}
	}
	slices.Sort(there)
	there = slices.Compact(there)
	loc := prefix[depth].Location
	if loc == nil {
		loc = ref[0].Location
	}
	msg := fmt.Sprintf("undefined ref %v: no package defines %v (under %v there are %s)", ref, prefix[:depth+1], prefix[:depth], strings.Join(there, ", "))
	if meant := suggest.Closest(prefix[:depth+1].String(), there); meant != "" {
		msg += fmt.Sprintf("; did you mean %s?", meant)
	}
	return b.src.error(policy.CodeType, loc, msg)
}

// annotateSchemas attaches schema annotations to every rule of the policy
// module m (not to tests, whose partial inputs are theirs to choose): the
// top-level data keys the rule reads that are in typed are typed by their
// derived schemas, and input by its package's input schema in the decision
// packages. The annotations are OPA's own (`# METADATA` `schemas:`), added
// in memory, so OPA's type checker reports every reference to a field or
// data path that does not exist; an author's own schema annotations still
// apply after them.
func annotateSchemas(m *ast.Module, typed map[string]bool) {
	var input []*ast.SchemaAnnotation
	switch {
	case m.Package.Path.Equal(toolCallRef):
		input = append(input, &ast.SchemaAnnotation{Path: ast.InputRootRef, Schema: toolCallSchemaRef})
	case m.Package.Path.Equal(toolResultRef):
		input = append(input, &ast.SchemaAnnotation{Path: ast.InputRootRef, Schema: toolResultSchemaRef})
	}
	added := make([]*ast.Annotations, 0, len(m.Rules))
	for _, r := range m.Rules {
		schemas := slices.Clone(input)
		for _, k := range dataKeys(r, m.Imports, typed) {
			path := ast.DefaultRootRef.Append(ast.StringTerm(k))
			schemas = append(schemas, &ast.SchemaAnnotation{Path: path, Schema: dataSchemaRef.Append(ast.StringTerm(k))})
		}
		if len(schemas) == 0 {
			continue
		}
		a := &ast.Annotations{Scope: "rule", Schemas: schemas, Location: r.Location}
		added = append(added, a.Copy(r))
	}
	m.Annotations = append(added, m.Annotations...)
}

// dataKeys returns the top-level data keys in typed that rule r reads,
// directly or through the module's imports, sorted. Only those are
// annotated: typing a key costs the checker a walk of the rule tree.
func dataKeys(r *ast.Rule, imports []*ast.Import, typed map[string]bool) []string {
	keys := map[string]bool{}
	add := func(ref ast.Ref) {
		if len(ref) > 1 && ref[0].Equal(ast.DefaultRootDocument) {
			if k, ok := ref[1].Value.(ast.String); ok && typed[string(k)] {
				keys[string(k)] = true
			}
		}
	}
	aliases := map[ast.Var]ast.Ref{}
	for _, imp := range imports {
		if ref, ok := imp.Path.Value.(ast.Ref); ok {
			aliases[imp.Name()] = ref
		}
	}
	ast.WalkRefs(r, func(ref ast.Ref) bool {
		add(ref)
		if v, ok := ref[0].Value.(ast.Var); ok {
			if imported, ok := aliases[v]; ok {
				add(imported)
			}
		}
		return false
	})
	return slices.Sorted(maps.Keys(keys))
}
