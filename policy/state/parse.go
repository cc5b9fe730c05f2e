package state

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// declKeys are the keys of one declaration, in the order errors list them.
var declKeys = []string{"name", "count", "countDistinct", "sum", "happenedBefore", "timeSinceLast",
	"tools", "outcomes", "by", "within", "resolution", "calendar", "timeZone"}

// Parse reads state declaration files (each a YAML document with one key,
// state, holding a list of declarations) into one Set. Every problem of
// every file is reported at once, each at its file:line:col with the
// source line; names must be unique across the files.
func Parse(files []policy.File) (*Set, policy.Errors) {
	p := &parser{set: &Set{byName: map[string]*Decl{}}}
	for _, f := range files {
		p.file(f)
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return p.set, nil
}

type parser struct {
	set   *Set
	errs  policy.Errors
	path  string
	lines []string
}

// at is where n is in the file and the snippet showing it.
func (p *parser) at(n *yaml.Node) (policy.Location, string) {
	loc := policy.Location{File: p.path}
	if n == nil {
		return loc, ""
	}
	loc.Line, loc.Column = n.Line, n.Column
	if n.Line >= 1 && n.Line <= len(p.lines) {
		return loc, policy.Snippet(strings.TrimRight(p.lines[n.Line-1], "\r"), n.Column)
	}
	return loc, ""
}

// toolName is the tool name of a tools entry, where it is.
func (p *parser) toolName(n *yaml.Node) policy.ToolName {
	loc, snippet := p.at(n)
	return policy.ToolName{Name: n.Value, Location: loc, Snippet: snippet}
}

func (p *parser) errorAt(n *yaml.Node, format string, args ...any) {
	loc, snippet := p.at(n)
	e := &policy.Error{Code: policy.CodeSchema, Location: loc, Snippet: snippet, Message: fmt.Sprintf(format, args...)}
	if len(p.errs) < policy.MaxErrors {
		p.errs = append(p.errs, e)
	}
}

func (p *parser) file(f policy.File) {
	p.path, p.lines = f.Path, strings.Split(string(f.Data), "\n")
	var doc yaml.Node
	if err := yaml.Unmarshal(f.Data, &doc); err != nil {
		e := &policy.Error{Code: policy.CodeParse, Location: policy.Location{File: f.Path}, Message: fmt.Sprintf("parsing state file: %v", err)}
		p.errs = append(p.errs, e)
		return
	}
	if len(doc.Content) == 0 {
		return // an empty file declares nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.errorAt(root, "a state file is a mapping with the key state")
		return
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "state" {
			p.errorAt(k, "unknown key %q%s", k.Value, didYouMean(k.Value, []string{"state"}))
			continue
		}
		if v.Kind != yaml.SequenceNode {
			p.errorAt(v, "state is a list of declarations")
			continue
		}
		for _, item := range v.Content {
			p.decl(item)
		}
	}
}

func (p *parser) decl(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		p.errorAt(n, "a state declaration is a mapping (name, count/sum/…, by, within …)")
		return
	}
	d := &Decl{Location: policy.Location{File: p.path, Line: n.Line, Column: n.Column}}
	at := map[string]*yaml.Node{}
	unreadable := map[string]bool{} // keys whose value is already an error
	var kindKey *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(declKeys, k.Value) {
			p.errorAt(k, "unknown key %q%s", k.Value, didYouMean(k.Value, declKeys))
			continue
		}
		at[k.Value] = v
		switch k.Value {
		case "name":
			d.Name = p.scalar(v)
		case "count", "countDistinct", "sum", "happenedBefore", "timeSinceLast":
			if kindKey != nil {
				p.errorAt(k, "a declaration has one of count, countDistinct, sum, happenedBefore, timeSinceLast; %s is already set", kindKey.Value)
				continue
			}
			kindKey = k
			d.Kind, d.Of = Kind(k.Value), Source(p.scalar(v))
		case "tools":
			for _, t := range p.listNodes(v) {
				d.Tools = append(d.Tools, t.Value)
				p.set.toolNames = append(p.set.toolNames, p.toolName(t))
			}
		case "outcomes":
			d.Outcomes = p.list(v)
		case "by":
			for _, s := range p.listNodes(v) {
				part, ok := scopePart(s.Value)
				if !ok {
					p.errorAt(s, "unknown scope %q%s", s.Value, didYouMean(s.Value, []string{"tenant", "principal", "agent", "session", "tool", "input.FIELD"}))
					continue
				}
				d.Scope = append(d.Scope, part)
			}
		case "within":
			if d.Window.Within = p.duration(v); d.Window.Within == 0 {
				unreadable[k.Value] = true
			}
		case "resolution":
			if d.Window.Resolution = p.duration(v); d.Window.Resolution == 0 {
				unreadable[k.Value] = true
			}
		case "calendar":
			d.Window.Calendar = Calendar(p.scalar(v))
		case "timeZone":
			loc, err := time.LoadLocation(p.scalar(v))
			if err != nil {
				p.errorAt(v, "unknown time zone %q", v.Value)
				continue
			}
			d.Window.Location = loc
		}
	}
	if at["name"] == nil {
		p.errorAt(n, "a state declaration needs a name")
		return
	}
	if kindKey == nil {
		p.errorAt(n, "state %q says what it computes with one of count, countDistinct, sum, happenedBefore, timeSinceLast", d.Name)
		return
	}
	if at["timeZone"] != nil && at["calendar"] == nil {
		p.errorAt(at["timeZone"], "timeZone applies to calendar windows")
	}
	for _, pr := range d.check() {
		if unreadable[pr.key] {
			continue // its value's error says it
		}
		node := at[pr.key]
		if node == nil {
			node = n
		}
		p.errorAt(node, "state %q: %s", d.Name, pr.msg)
	}
	if prev := p.set.Lookup(d.Name); prev != nil {
		p.errorAt(at["name"], "state %q is already declared at %s", d.Name, prev.Location)
		return
	}
	p.set.add(d)
}

// scopePart parses one element of by.
func scopePart(s string) (ScopePart, bool) {
	if f, ok := strings.CutPrefix(s, "input."); ok && f != "" {
		return ScopePart{Kind: ScopeInput, Field: f}, true
	}
	switch k := ScopeKind(s); k {
	case ScopeTenant, ScopePrincipal, ScopeAgent, ScopeSession, ScopeTool:
		return ScopePart{Kind: k}, true
	}
	return ScopePart{}, false
}

func (p *parser) scalar(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		p.errorAt(n, "want a single value")
		return ""
	}
	return n.Value
}

func (p *parser) listNodes(n *yaml.Node) []*yaml.Node {
	if n.Kind == yaml.ScalarNode {
		return []*yaml.Node{n}
	}
	if n.Kind != yaml.SequenceNode {
		p.errorAt(n, "want a list")
		return nil
	}
	var out []*yaml.Node
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			p.errorAt(c, "want a single value")
			continue
		}
		out = append(out, c)
	}
	return out
}

func (p *parser) list(n *yaml.Node) []string {
	var out []string
	for _, c := range p.listNodes(n) {
		out = append(out, c.Value)
	}
	return out
}

// duration parses a Go duration or a whole number of days ("7d").
func (p *parser) duration(n *yaml.Node) time.Duration {
	s := p.scalar(n)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(days); err == nil && d > 0 {
			return time.Duration(d) * 24 * time.Hour
		}
	}
	d, err := time.ParseDuration(s)
	if f, nerr := strconv.ParseFloat(s, 64); nerr == nil && f > 0 {
		p.errorAt(n, "%s has no unit: want a duration such as %ss, %sm or %sh", s, s, s, s)
		return 0
	}
	if err != nil || d <= 0 {
		p.errorAt(n, "want a positive duration such as 30s, 1h or 7d, not %q", s)
		return 0
	}
	return d
}
