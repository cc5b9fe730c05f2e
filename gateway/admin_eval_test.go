package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/decisions"
)

// TestRulesEvalCandidate dry-runs one input on the live revision and on a
// candidate posted as files, as the console's playground does: the answer
// puts both side by side, a candidate that does not load is refused whole
// with its positions, and without a candidate the answer is the live
// result alone, as before.
func TestRulesEvalCandidate(t *testing.T) {
	cfg := testConfig(t, "basic")
	decisionKeys(cfg)
	g := startGateway(t, cfg, Options{})
	weather := map[string]any{"type": "tool-call", "toolCallId": "c1", "toolName": "get_weather", "input": map[string]any{"city": "Lima"}, "tool": map[string]any{"name": "get_weather", "kind": "http"}}
	blockAll := map[string]string{"tools.rego": "package turngate.tool_call\n\nblock contains \"frozen for the audit\" if {\n\tinput.tool.name != \"\"\n}\n"}
	tooMany := map[string]string{}
	for i := range decisions.MaxCandidateFiles + 1 {
		tooMany[fmt.Sprintf("r%d.rego", i)] = "package turngate.tool_call\n"
	}
	type result struct {
		Revision   string   `json:"revision"`
		Outcome    string   `json:"outcome"`
		RulesFired []string `json:"rulesFired"`
		Result     struct {
			Action string `json:"action"`
		} `json:"result"`
	}
	for _, tc := range []struct {
		name       string
		key        string
		body       map[string]any
		wantStatus int
		check      func(t *testing.T, body []byte)
	}{{
		name:       "a candidate that blocks where live allows",
		key:        dkAcmeAdmin,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather, "candidate": map[string]any{"files": blockAll}},
		wantStatus: http.StatusOK,
		check: func(t *testing.T, body []byte) {
			var got struct{ Live, Candidate result }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Live.Outcome != "no_match" || got.Live.Result.Action == "block" {
				t.Errorf("live: %+v, want get_weather allowed", got.Live)
			}
			if got.Candidate.Outcome != "matched" || got.Candidate.Result.Action != "block" || len(got.Candidate.RulesFired) == 0 {
				t.Errorf("candidate: %+v, want get_weather blocked by the candidate's rule", got.Candidate)
			}
			if got.Live.Revision == "" || got.Live.Revision == got.Candidate.Revision {
				t.Errorf("revisions live %q, candidate %q: want two different ones", got.Live.Revision, got.Candidate.Revision)
			}
		},
	}, {
		name:       "no candidate: the live result alone, as before",
		key:        dkAcmeAdmin,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather},
		wantStatus: http.StatusOK,
		check: func(t *testing.T, body []byte) {
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if _, ok := got["live"]; ok || got["outcome"] != "no_match" || got["hook"] != "beforeToolCall" {
				t.Errorf("answer %s, want the live EvalResult itself", body)
			}
			if _, ok := got["notFired"]; ok {
				t.Errorf("answer %s has notFired without explain", body)
			}
		},
	}, {
		name: "explain: the candidate's rule that did not fire, with the expression that failed",
		key:  dkAcmeAdmin,
		body: map[string]any{"hook": "beforeToolCall", "input": weather, "explain": true, "candidate": map[string]any{"files": map[string]string{
			"tools.rego": "package turngate.tool_call\n\nblock contains \"no deletes\" if {\n\tinput.tool.name == \"delete\"\n}\n"}}},
		wantStatus: http.StatusOK,
		check: func(t *testing.T, body []byte) {
			var got struct {
				Candidate struct {
					NotFired []struct {
						Rule     string `json:"rule"`
						Failed   string `json:"failed"`
						FailedAt struct {
							File string `json:"file"`
							Line int    `json:"line"`
						} `json:"failedAt"`
					} `json:"notFired"`
				} `json:"candidate"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			nf := got.Candidate.NotFired
			if len(nf) != 1 || nf[0].Rule != "data.turngate.tool_call.block" || nf[0].Failed != `input.tool.name == "delete"` ||
				nf[0].FailedAt.File != "tools.rego" || nf[0].FailedAt.Line != 4 {
				t.Errorf("candidate notFired %+v in %s, want block failing at tools.rego:4", nf, body)
			}
		},
	}, {
		name:       "a broken candidate is 400 with file:line",
		key:        dkAcmeAdmin,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather, "candidate": map[string]any{"files": map[string]string{"tools.rego": "package turngate.tool_call\n\nblock contains x if {\n"}}},
		wantStatus: http.StatusBadRequest,
		check: func(t *testing.T, body []byte) {
			var got struct {
				Code   string `json:"code"`
				Errors []struct {
					Location struct {
						File string `json:"file"`
						Line int    `json:"line"`
					} `json:"location"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Code != CodeRulesInvalid || len(got.Errors) == 0 || got.Errors[0].Location.File != "tools.rego" || got.Errors[0].Location.Line == 0 {
				t.Errorf("answer %s, want rules_invalid positioned in tools.rego", body)
			}
		},
	}, {
		name:       "too many files",
		key:        dkAcmeAdmin,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather, "candidate": map[string]any{"files": tooMany}},
		wantStatus: http.StatusBadRequest,
		check:      wantMessage("candidate.files", "at most 64"),
	}, {
		name:       "a file name with a directory",
		key:        dkAcmeAdmin,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather, "candidate": map[string]any{"files": map[string]string{"../tools.rego": "package a\n"}}},
		wantStatus: http.StatusBadRequest,
		check:      wantMessage("candidate.files", "not a plain file name"),
	}, {
		name:       "an unknown key in the candidate",
		key:        dkAcmeAdmin,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather, "candidate": map[string]any{"file": blockAll}},
		wantStatus: http.StatusBadRequest,
		check:      wantMessage("file"),
	}, {
		name:       "a key without the admin role",
		key:        dkAcmeUser,
		body:       map[string]any{"hook": "beforeToolCall", "input": weather, "candidate": map[string]any{"files": blockAll}},
		wantStatus: http.StatusForbidden,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.as(tc.key).do("POST", "/v1/admin/rules/eval", tc.body)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}

// wantMessage checks that an error answer's message holds each of parts.
func wantMessage(parts ...string) func(t *testing.T, body []byte) {
	return func(t *testing.T, body []byte) {
		t.Helper()
		var got struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if !strings.Contains(got.Message, p) {
				t.Errorf("message %q does not say %q", got.Message, p)
			}
		}
	}
}
