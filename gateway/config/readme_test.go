package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// readmeConfig returns the yaml block of the "## Configuration" section of
// the repository's README.md.
func readmeConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Configuration\n")
	if !ok {
		t.Fatal(`README.md has no "## Configuration" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the Configuration section has no ```yaml block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("the Configuration section's yaml block is not closed")
	}
	return []byte(block)
}

// envRef matches the ${VAR} and ${VAR:-default} references of a config.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// TestREADMEConfig keeps README's configuration reference true: its yaml
// block must parse and validate with the variables it references set.
func TestREADMEConfig(t *testing.T) {
	block := readmeConfig(t)
	vars := map[string]string{}
	for _, m := range envRef.FindAllStringSubmatch(string(block), -1) {
		vars[m[1]] = "value-of-" + m[1] + "-7f3c9a2b4e8d1f60" // strong enough for a key
	}
	c, err := Parse("README.md", block, env(vars))
	if err != nil {
		t.Fatalf("README.md's configuration reference does not parse:\n%v", err)
	}
	if len(c.Agents) == 0 || len(c.Providers) == 0 {
		t.Errorf("README config has no agents or providers: %+v", c)
	}
}

// TestREADMEConfigKeys keeps README's configuration reference complete:
// every key the config takes (its yaml struct tags, at every depth) is a
// key of the reference's yaml block — or of the same struct elsewhere in
// it (an agent's attachments are limits.attachments') — or is named in one
// of the block's comments, as "key:" or in a list "# also: topP, topK".
func TestREADMEConfigKeys(t *testing.T) {
	block := readmeConfig(t)
	var root yaml.Node
	if err := yaml.Unmarshal(block, &root); err != nil || len(root.Content) == 0 {
		t.Fatalf("README.md's yaml block: %v", err)
	}
	documented := map[fieldKey]bool{}
	visit(root.Content[0], reflect.TypeFor[Config](), "", func(n *yaml.Node, t reflect.Type, _ string) bool {
		if st := structOf(t); st != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				documented[fieldKey{st, n.Content[i].Value}] = true
			}
		}
		return false
	})
	var comments strings.Builder
	for _, line := range strings.Split(string(block), "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			comments.WriteString(line[i:] + "\n")
		}
	}
	also := map[string]bool{}
	for _, m := range alsoList.FindAllStringSubmatch(comments.String(), -1) {
		for _, k := range strings.Split(m[1], ",") {
			also[strings.TrimSpace(k)] = true
		}
	}
	for path, k := range configKeys(reflect.TypeFor[Config](), "") {
		named := also[k.key] || regexp.MustCompile(`\b`+regexp.QuoteMeta(k.key)+`:`).MatchString(comments.String())
		if !documented[k] && !named {
			t.Errorf("README.md's configuration reference does not show %s", path)
		}
	}
}

// alsoList matches a comment's list of keys the block does not show.
var alsoList = regexp.MustCompile(`also: ([A-Za-z, ]+)`)

// fieldKey is a key of a struct type: a key documented for one use of the
// type is documented for every use.
type fieldKey struct {
	in  reflect.Type
	key string
}

// configKeys returns every key that t takes, by its path ("agents[].topK",
// "models.*.provider"). Types that decode themselves (UnmarshalYAML) are
// leaves.
func configKeys(t reflect.Type, path string) map[string]fieldKey {
	out := map[string]fieldKey{}
	t = structOf(t)
	if t == nil {
		return out
	}
	for k, ft := range yamlFields(t) {
		p := joinPath(path, k)
		out[p] = fieldKey{t, k}
		switch inner := deref(ft); inner.Kind() {
		case reflect.Slice:
			p += "[]"
			ft = inner.Elem()
		case reflect.Map:
			p += ".*"
			ft = inner.Elem()
		}
		for sub, fk := range configKeys(ft, p) {
			out[sub] = fk
		}
	}
	return out
}

// docKeyRef matches a backquoted dotted name in a doc, such as
// `limits.approvalExpiry` or `agents[].bodySchema`.
var docKeyRef = regexp.MustCompile("`([a-zA-Z][a-zA-Z0-9]*(?:\\[\\])?(?:\\.[a-zA-Z*][a-zA-Z0-9]*(?:\\[\\])?)+)`")

// docFileName matches names that are files, not config paths
// (`tools.rego`, `audit.jsonl`).
var docFileName = regexp.MustCompile(`\.(rego|ya?ml|json|jsonl|md|go|sh|txt|html|js|ts|pem|db|sqlite)$`)

// ruleNames are the roots of what rules read and set, which the docs name
// beside config keys: input.tool.name, turn.body, timeout.totalMs, ….
var ruleNames = map[string]bool{"input": true, "data": true, "turn": true, "step": true, "principal": true,
	"session": true, "timeout": true, "attachments": true, "decision": true, "shadow": true}

// TestDocsNameRealConfigKeys keeps the docs' config paths true: every
// backquoted dotted name in the user docs (README.md, rules/README.md,
// API.md, docs/*.md — SECURITY.md names many — and the examples' READMEs)
// whose first part is a top-level
// config key (`limits.approvalExpiry`, `audit.recordInput`) is a key the
// config takes. rules/README.md once documented `approvals.expiry`, which
// does not exist.
func TestDocsNameRealConfigKeys(t *testing.T) {
	var patterns [][]string
	top := map[string]bool{}
	var names []string // every key's own name, lower case
	for path := range configKeys(reflect.TypeFor[Config](), "") {
		segs := strings.Split(strings.ReplaceAll(path, "[]", ""), ".")
		patterns = append(patterns, segs)
		top[segs[0]] = true
		names = append(names, strings.ToLower(segs[len(segs)-1]))
	}
	// configish says a first part reads as config: a top-level key, or a
	// word that starts a key's name (approvals… for approvalExpiry), as a
	// made-up path would.
	configish := func(first string) bool {
		if top[first] {
			return true
		}
		if ruleNames[first] {
			return false
		}
		stem := strings.TrimSuffix(strings.ToLower(first), "s")
		for _, n := range names {
			if len(stem) >= 5 && strings.HasPrefix(n, stem) {
				return true
			}
		}
		return false
	}
	known := func(segs []string) bool {
		for _, p := range patterns {
			if len(p) != len(segs) {
				continue
			}
			ok := true
			for i := range p {
				ok = ok && (p[i] == segs[i] || p[i] == "*" || segs[i] == "*")
			}
			if ok {
				return true
			}
		}
		return false
	}
	docs, err := filepath.Glob(filepath.Join("..", "..", "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(append(docs, more...), filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "rules", "README.md"), filepath.Join("..", "API.md"))
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range docKeyRef.FindAllStringSubmatch(line, -1) {
				segs := strings.Split(strings.ReplaceAll(m[1], "[]", ""), ".")
				if !configish(segs[0]) || docFileName.MatchString(m[1]) || known(segs) {
					continue
				}
				t.Errorf("%s:%d: `%s` is not a config key", doc, i+1, m[1])
			}
		}
	}
}
