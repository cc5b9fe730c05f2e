package opa

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// ruleFiles are one directory's files split the way ruleset splits them.
type ruleFiles struct {
	modules, tests, data []policy.File
}

// loadDir reads dir's Rego, test and data files, with paths as
// "testdata/…" so diagnostics name them.
func loadDir(t testing.TB, dir string) ruleFiles {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFiles
	for _, e := range entries {
		p := filepath.ToSlash(filepath.Join(dir, e.Name()))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := policy.File{Path: p, Data: b}
		switch {
		case strings.HasSuffix(p, "_test.rego"):
			rf.tests = append(rf.tests, f)
		case strings.HasSuffix(p, ".rego"):
			rf.modules = append(rf.modules, f)
		case strings.HasSuffix(p, ".json"), strings.HasSuffix(p, ".data.yaml"):
			rf.data = append(rf.data, f)
		}
	}
	return rf
}

// mustCompile compiles modules given as path → source.
func mustCompile(t testing.TB, opts Options, modules map[string]string, data ...policy.File) *Policy {
	t.Helper()
	p, errs := Compile(files(modules), data, opts)
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	return p
}

func files(m map[string]string) []policy.File {
	var fs []policy.File
	for p, src := range m {
		fs = append(fs, policy.File{Path: p, Data: []byte(src)})
	}
	return fs
}

// call builds a tool call context for tool name with a JSON input.
func call(name, input string) *engine.ToolCallContext {
	return &engine.ToolCallContext{
		Identity: engine.Identity{
			RequestID: "req-1",
			SessionID: "sess-1",
			Agent:     "support",
			EntryPath: engine.EntryChat,
			Principal: engine.Principal{Tenant: "acme", Subject: "alice", Roles: []string{"user"}},
		},
		Type:       "tool-call",
		ToolCallID: "call-1",
		ToolName:   name,
		Input:      json.RawMessage(input),
		Tool:       engine.ToolInfo{Name: name, Kind: engine.ToolKindHTTP},
	}
}

// errCode returns err's policy code, or "" if err is not a *policy.Error.
func errCode(err error) string {
	if pe, ok := err.(*policy.Error); ok {
		return pe.Code
	}
	return ""
}

// testOptions has deadlines generous enough for a loaded machine under the
// race detector; only the timeout test uses a tight one.
var testOptions = Options{Timeout: time.Minute, TestTimeout: time.Minute}
