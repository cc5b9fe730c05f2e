package ruleset

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Kind
	}{
		{"turn.yaml", KindCEL},
		{"turn.yml", KindCEL},
		{"turn_test.yaml", KindCELTest},
		{"turn_test.yml", KindCELTest},
		{"tools.rego", KindRego},
		{"tools_test.rego", KindRegoTest},
		{"limits.json", KindData},
		{"data.yaml", KindData},
		{"data.yml", KindData},
		{"tenants.data.yaml", KindData},
		{"tenants.data.yml", KindData},
		{"README.md", KindIgnored},
		{"notes.txt", KindIgnored},
		{"Makefile", KindIgnored},
		{".hidden.yaml", KindIgnored},
		{"..data", KindIgnored},
		{"..2024_01_01_00_00_00.123", KindIgnored},
		{"turn.yaml~", KindIgnored},
		{".#turn.yaml", KindIgnored},
		{".turn.yaml.swp", KindIgnored},
		{"turn.yaml.swp", KindIgnored},
		{"turn.yaml.swx", KindIgnored},
		{"#turn.yaml#", KindIgnored},
		{"4913", KindIgnored}, // vim's write test file
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.name); got != tc.want {
				t.Errorf("Classify(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

func TestLoadClassifiesFiles(t *testing.T) {
	dir := rulesDir(t, defaultSet())
	// A subdirectory is never loaded, however its files are named.
	writeFiles(t, filepath.Join(dir, "cookbook"), map[string]string{"broken.yaml": "beforeTurn: [oops"})
	rev := mustLoad(t, dir, Options{})
	var got []string
	for _, f := range rev.Files() {
		got = append(got, f.Name+"="+string(f.Kind))
	}
	want := []string{
		"10-turn.yaml=cel", "20-step.yaml=cel", "limits.json=data",
		"results.rego=rego", "tools.rego=rego", "tools_test.rego=rego-test",
	}
	if !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if !rev.CEL().HasBeforeTurn() || !rev.CEL().HasBeforeStep() {
		t.Error("CEL hooks missing")
	}
	if !rev.Rego().HasToolCall() || !rev.Rego().HasToolResult() {
		t.Error("Rego decisions missing")
	}
	if !strings.HasPrefix(rev.ID(), "sha256:") || len(rev.ID()) != len("sha256:")+64 {
		t.Errorf("ID = %q, want sha256:<64 hex>", rev.ID())
	}
}

func TestRevisionIDStable(t *testing.T) {
	base := mustLoad(t, rulesDir(t, defaultSet()), Options{}).ID()
	edit := func(f func(map[string]string)) string {
		files := defaultSet()
		f(files)
		return mustLoad(t, rulesDir(t, files), Options{}).ID()
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		same bool
	}{
		{"same files elsewhere", func(map[string]string) {}, true},
		{"ignored file added", func(m map[string]string) { m["notes.txt"] = "x"; m[".turn.yaml.swp"] = "x" }, true},
		{"rule edited", func(m map[string]string) { m["10-turn.yaml"] += "# comment\n" }, false},
		{"test edited", func(m map[string]string) { m["tools_test.rego"] += "# comment\n" }, false},
		{"file renamed", func(m map[string]string) { m["11-turn.yaml"] = m["10-turn.yaml"]; delete(m, "10-turn.yaml") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := edit(tc.edit); (got == base) != tc.same {
				t.Errorf("id %s vs base %s: same = %v, want %v", got, base, got == base, tc.same)
			}
		})
	}
}

func TestRevisionIDUnambiguous(t *testing.T) {
	// Both sets concatenate to the same bytes; their ids must differ.
	a := mustLoad(t, rulesDir(t, map[string]string{"a.rego": "package p\n# a\n", "b.rego": "package q\n"}), Options{})
	b := mustLoad(t, rulesDir(t, map[string]string{"a.rego": "package p\n", "b.rego": "# a\npackage q\n"}), Options{})
	if a.ID() == b.ID() {
		t.Errorf("contents moved between files kept the id %s", a.ID())
	}
}

func TestLoadReportsAllErrors(t *testing.T) {
	dir := rulesDir(t, map[string]string{
		"a-turn.yaml":  "beforeTurn:\n  - name: bad-type\n    when: 'true'\n    set:\n      maxSteps: '\"three\"'\n",
		"b-tools.rego": "package turngate.tool_call\n\nimport rego.v1\n\nblock contains x if {\n\tx := \n",
		"c.json":       `{"a": `,
		"d-ok.yaml":    celTurn,
	})
	_, errs := Load(dir, Options{})
	if errs == nil {
		t.Fatal("Load succeeded, want errors")
	}
	files := map[string]bool{}
	for _, e := range errs {
		name := filepath.Base(e.Location.File)
		files[name] = true
		if name != "c.json" && e.Location.Line == 0 {
			t.Errorf("error without a line: %v", e)
		}
	}
	for _, f := range []string{"a-turn.yaml", "b-tools.rego", "c.json"} {
		if !files[f] {
			t.Errorf("no error reported for %s; got:\n%v", f, errs)
		}
	}
	sorted := slices.IsSortedFunc(errs, func(a, b *policy.Error) int { return strings.Compare(a.Location.File, b.Location.File) })
	if !sorted {
		t.Errorf("errors not in file order:\n%v", errs)
	}
}

func TestLoadReadErrors(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		_, errs := Load(filepath.Join(t.TempDir(), "nope"), Options{})
		if len(errs) != 1 || errs[0].Code != policy.CodeIO {
			t.Fatalf("errs = %v, want one io_error", errs)
		}
	})
	t.Run("file over the limit", func(t *testing.T) {
		dir := rulesDir(t, map[string]string{"big.json": `{"x": "` + strings.Repeat("a", MaxFileBytes) + `"}`})
		_, errs := Load(dir, Options{})
		if len(errs) != 1 || errs[0].Code != policy.CodeIO || !strings.Contains(errs[0].Message, "limit") {
			t.Fatalf("errs = %v, want one io_error about the limit", errs)
		}
	})
	t.Run("dangling symlink", func(t *testing.T) {
		dir := rulesDir(t, nil)
		if err := os.Symlink("missing.yaml", filepath.Join(dir, "turn.yaml")); err != nil {
			t.Fatal(err)
		}
		_, errs := Load(dir, Options{})
		if len(errs) != 1 || errs[0].Code != policy.CodeIO || filepath.Base(errs[0].Location.File) != "turn.yaml" {
			t.Fatalf("errs = %v, want one io_error for turn.yaml", errs)
		}
	})
}

// configMapDir lays files out as a Kubernetes ConfigMap volume does: a
// timestamped directory, a "..data" symlink to it, and one symlink per file
// into "..data/".
func configMapDir(t testing.TB, dir, stamp string, files map[string]string) {
	t.Helper()
	writeFiles(t, filepath.Join(dir, stamp), files)
	if err := os.Symlink(stamp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// swapConfigMap replaces the contents of a configMapDir the way the kubelet
// does: a new timestamped directory, then an atomic rename of a fresh
// symlink over "..data". The file names must stay the same.
func swapConfigMap(t testing.TB, dir, stamp string, files map[string]string) {
	t.Helper()
	writeFiles(t, filepath.Join(dir, stamp), files)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConfigMapLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rules")
	configMapDir(t, dir, "..2024_01_01_00_00_00.1", defaultSet())
	plain := mustLoad(t, rulesDir(t, defaultSet()), Options{})
	rev := mustLoad(t, dir, Options{})
	if rev.ID() != plain.ID() {
		t.Errorf("ConfigMap layout id %s, plain layout %s: want equal", rev.ID(), plain.ID())
	}
	if len(rev.Files()) != len(plain.Files()) {
		t.Errorf("ConfigMap layout files %v, want %v", rev.Files(), plain.Files())
	}
}

// FuzzEval feeds dry-run inputs (what the admin API and `turngate eval`
// accept from users) to every hook: a clear error or a result, never a
// panic or a hang.
func FuzzEval(f *testing.F) {
	for _, seed := range []string{
		`{"toolName": "search", "tool": {"name": "search"}, "input": {"limit": 100}}`,
		"toolName: delete\ninput: {path: /x}\nbody: {mode: read-only}\n",
		"turn: {continuation: true, maxSteps: 50}\nnow: 2025-01-01T00:00:00Z\n",
		"continuation: true\nbody: {mode: read-only}\n",
		`{"stepNumber": 1, "steps": [{"toolCalls": [], "toolResults": [{"toolName": "x"}]}]}`,
		`{"output": {"secret": 1, "a": [{"token": "t"}]}, "success": true}`,
		`{"input": "not json object"}`, `{"input": {"a": 1e999}}`,
		`{"kind": "decision", "seq": 3, "prevHash": "ab", "hook": "beforeTurn", "outcome": "no_match", "input": {"turn": {}}}`,
		`{"kind": "decision", "hook": "beforeToolCall"}`, `{"kind": "turn", "seq": 1}`, `{"kind": 1, "hook": "x", "input": {}}`,
		"", "[", "a: [", "- 1\n- 2\n", "null", "{}",
	} {
		f.Add([]byte(seed))
	}
	rev := mustLoad(f, rulesDir(f, defaultSet()), Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, hook := range []string{policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult} {
			res, err := rev.Eval(context.Background(), hook, data)
			if (res == nil) == (err == nil) {
				t.Fatalf("%s: result %v and error %v", hook, res, err)
			}
		}
	})
}

// TestEvalInputLimit checks that every hook's dry-run input, a CEL test-case
// input included, is refused over MaxEvalInputBytes before it is parsed.
func TestEvalInputLimit(t *testing.T) {
	rev := mustLoad(t, rulesDir(t, defaultSet()), Options{})
	big := []byte("turn: {system: \"" + strings.Repeat("x", MaxEvalInputBytes) + "\"}\n")
	for _, hook := range []string{policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult} {
		t.Run(hook, func(t *testing.T) {
			res, err := rev.Eval(context.Background(), hook, big)
			if err == nil || !strings.Contains(err.Error(), "byte limit") {
				t.Fatalf("Eval over the limit = %v, %v; want a size error", res, err)
			}
		})
	}
}

// TestMisnamedRuleFilesWarn: a file whose extension is nearly a rule
// file's, or a folder of rule files, is not loaded, and the revision's
// warnings (which check prints and a reload logs) say so, with the name
// meant; files and folders that are plainly something else (a hidden
// ..data among them) are left out without a word.
func TestMisnamedRuleFilesWarn(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"tools.rego":  "package turngate.tool_call\n\nblock contains \"no deletes\" if input.tool.name == \"delete\"\n",
		"more.rgo":    "package turngate.tool_call\n\nblock contains \"no rm\" if input.tool.name == \"rm\"\n",
		"turn.YAML":   "beforeTurn: []\n",
		"limits.jsn":  "{}\n",
		"README.md":   "notes\n",
		"notes.txt":   "notes\n",
		"audit.jsonl": "{}\n",
		"pom.xml":     "<x/>\n",
		"tools.rego~": "backup\n",
	})
	writeFiles(t, filepath.Join(dir, "payments"), map[string]string{"payments.rego": "package turngate.tool_call\n"})
	writeFiles(t, filepath.Join(dir, "docs"), map[string]string{"notes.md": "notes\n"})
	writeFiles(t, filepath.Join(dir, "..data"), map[string]string{"tools.rego": "package turngate.tool_call\n"})
	rev, errs := Load(dir, Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	var got []string
	for _, w := range rev.Warnings() {
		if w.Code == policy.CodeIgnoredFileWarning {
			got = append(got, filepath.Base(w.Location.File)+": "+w.Message)
		}
	}
	want := []string{
		"limits.jsn: limits.jsn is not loaded: rule files end in .rego, .yaml, .yml or .json; did you mean limits.json?",
		"more.rgo: more.rgo is not loaded: rule files end in .rego, .yaml, .yml or .json; did you mean more.rego?",
		"payments: payments/ holds rule files (payments.rego among them) that are not loaded: only the rules directory's top level is read; move them up beside the others",
		"turn.YAML: turn.YAML is not loaded: rule files end in .rego, .yaml, .yml or .json; did you mean turn.yaml?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
