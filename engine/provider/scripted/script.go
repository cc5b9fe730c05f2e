package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// Script is a parsed and validated scripted-model script: an ordered list of
// rules, the first matching rule answering. Build one with Parse.
type Script struct {
	path  string
	rules []*rule
}

// Path returns the file name the script was parsed from.
func (s *Script) Path() string { return s.path }

// rule is one compiled script rule.
type rule struct {
	name string
	line int

	// Exactly one of user and tool is set.
	user *textMatch
	tool *toolResultMatch

	reasoning string
	text      string
	calls     []callTemplate
	// output is the structured-output value template, nil when absent.
	output any
}

// textMatch matches the last user text.
type textMatch struct {
	contains string
	exact    string
	re       *regexp.Regexp
}

// toolResultMatch matches one result of the last tool message.
type toolResultMatch struct {
	tool     string
	contains string
}

// callTemplate is a scripted tool call; string leaves of input are templates.
type callTemplate struct {
	name  string
	input any
}

// The YAML shapes, decoded strictly: unknown fields are errors.
type fileYAML struct {
	Rules []ruleYAML `yaml:"rules"`
}

type ruleYAML struct {
	Name  string    `yaml:"name"`
	When  whenYAML  `yaml:"when"`
	Reply replyYAML `yaml:"reply"`
}

type whenYAML struct {
	User       *userYAML       `yaml:"user"`
	ToolResult *toolResultYAML `yaml:"toolResult"`
}

type userYAML struct {
	Contains string `yaml:"contains"`
	Exact    string `yaml:"exact"`
	Regex    string `yaml:"regex"`
}

type toolResultYAML struct {
	Tool     string `yaml:"tool"`
	Contains string `yaml:"contains"`
}

type replyYAML struct {
	Reasoning string         `yaml:"reasoning"`
	Text      string         `yaml:"text"`
	ToolCalls []toolCallYAML `yaml:"toolCalls"`
	Output    yaml.Node      `yaml:"output"`
}

type toolCallYAML struct {
	Name  string    `yaml:"name"`
	Input yaml.Node `yaml:"input"`
}

// MaxScriptBytes bounds a script file; scripts are hand-written and small,
// so anything larger is a mistake rather than a script.
const MaxScriptBytes = 1 << 20

// Parse decodes and validates a script. path names the file in diagnostics.
// Every problem found is reported, each with its line, as policy.Errors.
func Parse(path string, data []byte) (*Script, error) {
	if len(data) > MaxScriptBytes {
		return nil, policy.Errors{{Code: policy.CodeParse, Location: policy.Location{File: path},
			Message: fmt.Sprintf("script is %d bytes, more than the %d allowed", len(data), MaxScriptBytes)}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlErrors(path, policy.CodeParse, err)
	}
	var f fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlErrors(path, policy.CodeSchema, err)
	}
	p := parser{path: path, lines: strings.Split(string(data), "\n")}
	s := &Script{path: path}
	ruleNodes := p.ruleNodes(&root)
	for i, ry := range f.Rules {
		var n *yaml.Node
		if i < len(ruleNodes) {
			n = ruleNodes[i]
		}
		if r := p.rule(i, ry, n); r != nil {
			s.rules = append(s.rules, r)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return s, nil
}

// yamlLine finds "line N:" in yaml.v3's messages.
var yamlLine = regexp.MustCompile(`line (\d+): `)

// unknownField rewrites yaml.v3's "field x not found in type pkg.T".
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// wrongType matches yaml.v3's "cannot unmarshal !!map into []pkg.T", with
// an optional quoted value between the tag and "into".
var wrongType = regexp.MustCompile("cannot unmarshal !!(\\w+) (?:`[^`]*` )?into (\\S+)")

// yamlKinds names YAML tags for diagnostics.
var yamlKinds = map[string]string{"map": "mapping", "seq": "list", "str": "string",
	"int": "number", "float": "number", "bool": "boolean", "null": "null"}

// goKind names the YAML shape a Go type expects.
func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string":
		return "a string"
	}
	return "a mapping"
}

// yamlErrors turns a yaml.v3 error into positioned diagnostics.
func yamlErrors(path, code string, err error) policy.Errors {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out policy.Errors
	for _, m := range msgs {
		e := &policy.Error{Code: code, Location: policy.Location{File: path}}
		m = strings.TrimPrefix(m, "yaml: ")
		if loc := yamlLine.FindStringSubmatchIndex(m); loc != nil {
			e.Location.Line, _ = strconv.Atoi(m[loc[2]:loc[3]])
			m = m[:loc[0]] + m[loc[1]:]
		}
		m = unknownField.ReplaceAllString(m, `unknown field "$1"`)
		e.Message = wrongType.ReplaceAllStringFunc(m, func(t string) string {
			g := wrongType.FindStringSubmatch(t)
			kind, ok := yamlKinds[g[1]]
			if !ok {
				kind = "!!" + g[1]
			}
			return fmt.Sprintf("got a %s, want %s", kind, goKind(g[2]))
		})
		out = append(out, e)
		if len(out) == policy.MaxErrors {
			break
		}
	}
	return out
}

// parser validates decoded rules and collects positioned errors.
type parser struct {
	path  string
	lines []string
	errs  policy.Errors
}

func (p *parser) errorf(n *yaml.Node, ruleName, field, format string, args ...any) {
	if len(p.errs) >= policy.MaxErrors {
		return
	}
	e := &policy.Error{Code: policy.CodeSchema, Location: policy.Location{File: p.path},
		Rule: ruleName, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Location.Line, e.Location.Column = n.Line, n.Column
		if n.Line >= 1 && n.Line <= len(p.lines) {
			e.Snippet = policy.Snippet(p.lines[n.Line-1], n.Column)
		}
	}
	p.errs = append(p.errs, e)
}

// ruleNodes returns the mapping nodes of the rules sequence.
func (p *parser) ruleNodes(root *yaml.Node) []*yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	seq := child(root.Content[0], "rules")
	if seq == nil {
		return nil
	}
	return seq.Content
}

// child returns the value node of key in mapping n, or nil.
func child(n *yaml.Node, keys ...string) *yaml.Node {
	for _, key := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// orNode returns the first non-nil node.
func orNode(ns ...*yaml.Node) *yaml.Node {
	for _, n := range ns {
		if n != nil {
			return n
		}
	}
	return nil
}

// rule validates one rule; it returns nil when the rule has errors.
func (p *parser) rule(i int, ry ruleYAML, n *yaml.Node) *rule {
	before := len(p.errs)
	name := ry.Name
	if name == "" {
		name = fmt.Sprintf("rule %d", i+1)
	}
	r := &rule{name: name, reasoning: ry.Reply.Reasoning, text: ry.Reply.Text}
	if n != nil {
		r.line = n.Line
	}
	vars := map[string]bool{"text": true}
	whenNode := orNode(child(n, "when"), n)
	switch w := ry.When; {
	case w.User != nil && w.ToolResult != nil:
		p.errorf(whenNode, name, "when", "set either user or toolResult, not both")
	case w.User != nil:
		r.user = p.textMatch(name, *w.User, orNode(child(n, "when", "user"), whenNode), vars)
	case w.ToolResult != nil:
		if w.ToolResult.Tool == "" && w.ToolResult.Contains == "" {
			p.errorf(orNode(child(n, "when", "toolResult"), whenNode), name, "when.toolResult", "set tool, contains or both")
		}
		r.tool = &toolResultMatch{tool: w.ToolResult.Tool, contains: w.ToolResult.Contains}
		vars["tool"], vars["output"] = true, true
	default:
		p.errorf(whenNode, name, "when", "missing when.user or when.toolResult")
	}

	replyNode := orNode(child(n, "reply"), n)
	rep := ry.Reply
	if rep.Text == "" && len(rep.ToolCalls) == 0 && rep.Output.Kind == 0 {
		p.errorf(replyNode, name, "reply", "reply needs text, toolCalls or output")
	}
	p.templateVars(orNode(child(n, "reply", "text"), replyNode), name, "reply.text", rep.Text, vars)
	p.templateVars(orNode(child(n, "reply", "reasoning"), replyNode), name, "reply.reasoning", rep.Reasoning, vars)
	callNodes := child(n, "reply", "toolCalls")
	for j, c := range rep.ToolCalls {
		cn := replyNode
		if callNodes != nil && j < len(callNodes.Content) {
			cn = callNodes.Content[j]
		}
		field := fmt.Sprintf("reply.toolCalls[%d]", j)
		if c.Name == "" {
			p.errorf(cn, name, field, "tool call needs a name")
		}
		input := map[string]any{}
		if c.Input.Kind != 0 {
			v, ok := p.value(&c.Input, name, field+".input", vars)
			if m, isMap := v.(map[string]any); ok && !isMap {
				p.errorf(&c.Input, name, field+".input", "tool call input must be a mapping")
			} else if ok {
				input = m
			}
		}
		r.calls = append(r.calls, callTemplate{name: c.Name, input: input})
	}
	if rep.Output.Kind != 0 {
		if v, ok := p.value(&rep.Output, name, "reply.output", vars); ok {
			r.output = v
		}
	}
	if len(p.errs) > before {
		return nil
	}
	return r
}

// textMatch validates a user-text matcher; regex groups become template
// variables.
func (p *parser) textMatch(name string, u userYAML, n *yaml.Node, vars map[string]bool) *textMatch {
	set := 0
	for _, s := range []string{u.Contains, u.Exact, u.Regex} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		p.errorf(n, name, "when.user", "set exactly one of contains, exact or regex")
		return nil
	}
	m := &textMatch{contains: u.Contains, exact: u.Exact}
	if u.Regex != "" {
		re, err := regexp.Compile(u.Regex)
		if err != nil {
			p.errorf(orNode(child(n, "regex"), n), name, "when.user.regex", "compiling regex: %v", err)
			return nil
		}
		m.re = re
		for i, g := range re.SubexpNames() {
			vars[strconv.Itoa(i)] = true
			if g != "" {
				vars[g] = true
			}
		}
	}
	return m
}

// value converts a YAML node to a JSON-compatible value, checking the
// template variables of its string leaves.
func (p *parser) value(n *yaml.Node, name, field string, vars map[string]bool) (any, bool) {
	var v any
	if err := n.Decode(&v); err != nil {
		p.errorf(n, name, field, "decoding value: %v", err)
		return nil, false
	}
	if _, err := json.Marshal(v); err != nil {
		p.errorf(n, name, field, "value is not representable as JSON: %v", err)
		return nil, false
	}
	ok := true
	walkStrings(v, func(s string) string {
		if !p.templateVars(n, name, field, s, vars) {
			ok = false
		}
		return s
	})
	return v, ok
}

// templateVars reports unknown ${name} references in s.
func (p *parser) templateVars(n *yaml.Node, name, field, s string, vars map[string]bool) bool {
	ok := true
	for _, ref := range templateRefs(s) {
		if !vars[ref] {
			p.errorf(n, name, field, "unknown template variable ${%s}; available: %s", ref, strings.Join(sortedKeys(vars), ", "))
			ok = false
		}
	}
	return ok
}
